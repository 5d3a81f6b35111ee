package caddymodule

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/account/oidc"
	"github.com/caddy-model-gateway/gateway/store"
)

// SSOConfig is single sign-on for the web console.
type SSOConfig struct {
	OIDC *OIDCConfig `json:"oidc,omitempty"`
}

// OIDCConfig is an OpenID Connect provider (oidc.Config). ClientSecret is
// read through the replacer when the app starts, so the config (and the
// admin API that shows it) holds only "{env.NAME}".
type OIDCConfig = oidc.Config

// parseSSO reads
//
//	sso oidc {
//		issuer <url>
//		client_id <id>
//		client_secret {env.NAME}
//		allowed_domains <domain>...
//		role_claim <claim>
//		redirect_url <url>
//	}
func parseSSO(d *caddyfile.Dispenser) (*SSOConfig, error) {
	if !d.NextArg() || d.Val() != "oidc" {
		return nil, d.Errf("sso takes a protocol and a block: 'sso oidc { issuer ... }'")
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	c := &OIDCConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := c.Set(d.Val(), d.RemainingArgs()); err != nil {
			return nil, d.WrapErr(err)
		}
	}
	return &SSOConfig{OIDC: c}, nil
}

// oidcProvider builds the configured provider over st, or nil when single
// sign-on is off. Nothing here is logged: the secret is in the result only.
func (c *SSOConfig) oidcProvider(st store.Store) (*oidc.Provider, error) {
	if c == nil || c.OIDC == nil {
		return nil, nil
	}
	repl := caddy.NewReplacer()
	o := c.OIDC
	if secret := strings.TrimSpace(repl.ReplaceAll(o.ClientSecret, "")); secret == "" {
		if unset := unsetEnv(o.ClientSecret); len(unset) > 0 {
			return nil, fmt.Errorf("sso oidc: client_secret %s is empty: %s is not set in the gateway's environment "+
				"({env.X} is read from the running gateway's own environment, at a reload too, never from the shell running caddy reload: "+
				"set it where the gateway starts, or write {file.PATH} to read it from a file at every reload)", o.ClientSecret, strings.Join(unset, ", "))
		}
	}
	domains := make([]string, len(o.AllowedDomains))
	for i, d := range o.AllowedDomains {
		domains[i] = repl.ReplaceAll(d, "")
	}
	p, err := oidc.New(oidc.Config{
		Issuer:         repl.ReplaceAll(o.Issuer, ""),
		ClientID:       repl.ReplaceAll(o.ClientID, ""),
		ClientSecret:   repl.ReplaceAll(o.ClientSecret, ""),
		RedirectURL:    repl.ReplaceAll(o.RedirectURL, ""),
		AllowedDomains: domains,
		RoleClaim:      o.RoleClaim,
	}, st)
	if err != nil {
		return nil, fmt.Errorf("sso oidc: %w", err)
	}
	return p, nil
}
