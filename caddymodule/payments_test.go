package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	// the provider the tests configure
	_ "github.com/caddy-model-gateway/gateway/payments/stripe"
)

// Each mistake in a payments block is refused with what to write instead.
func TestParsePaymentsRefuses(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"payments", "takes a provider"},
		{"payments paypal {\n}", `unknown provider "paypal" (known: stripe)`},
		{"payments stripe extra {\n}", "wrong argument count"},
		{"payments stripe {\n success_url\n}", "success_url takes one URL"},
		{"payments stripe {\n prices usd10\n}", "prices takes a block"},
		{"payments stripe {\n prices {\n usd10 10.00 usd\n }\n}", "'<id> <amount> <currency> <credit units>'"},
		{"payments stripe {\n prices {\n usd10 10.001 usd 10000000\n }\n}", "at most 2 decimals"},
		{"payments stripe {\n prices {\n usd10 10.00 usd 10.5\n }\n}", "positive whole number of units"},
		{"payments stripe {\n prices {\n usd10 10.00 usd 0\n }\n}", "positive whole number of units"},
		{"payments stripe {\n colour blue\n}", `unrecognized option "colour"`},
	} {
		d := caddyfile.NewTestDispenser(tt.src)
		d.Next()
		if _, err := parsePayments(d); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error saying %q", tt.src, err, tt.want)
		}
	}
}
