package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestParseSSORefusals(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"sso", "sso takes a protocol"},
		{"sso saml {\n}", "sso takes a protocol"},
		{"sso oidc extra {\n}", "wrong argument count"},
		{"sso oidc {\nissuer\n}", "issuer takes one value"},
		{"sso oidc {\nallowed_domains\n}", "allowed_domains takes one or more"},
		{"sso oidc {\nscopes openid\n}", `unrecognized option "scopes"`},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		if _, err := parseSSO(d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestSSOSecretFromTheEnvironment: the config holds the placeholder; the
// provider is built with the value, and a config missing a part is refused.
func TestSSOSecretFromTheEnvironment(t *testing.T) {
	t.Setenv("TEST_OIDC_SECRET", "from-the-environment")
	c := &SSOConfig{OIDC: &OIDCConfig{Issuer: "https://id.example", ClientID: "gw",
		ClientSecret: "{env.TEST_OIDC_SECRET}", AllowedDomains: []string{"a.example"}}}
	if p, err := c.oidcProvider(nil); err != nil || p == nil {
		t.Fatalf("provider: %v", err)
	}
	c.OIDC.ClientSecret = "{env.TEST_OIDC_UNSET}"
	if _, err := c.oidcProvider(nil); err == nil || !strings.Contains(err.Error(), "TEST_OIDC_UNSET is not set in the gateway's environment") {
		t.Fatalf("an unset secret: %v", err)
	}
	if p, err := (*SSOConfig)(nil).oidcProvider(nil); p != nil || err != nil {
		t.Fatalf("no sso: %v %v", p, err)
	}
}
