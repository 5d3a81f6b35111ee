package caddymodule

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/payments"
)

// PaymentsConfig is self-serve top-up: a payment provider (a
// gateway.payments module, selected by "name" with its own options
// beside it), the price list and where the customer comes back to.
type PaymentsConfig struct {
	ProviderRaw json.RawMessage `json:"provider,omitempty" caddy:"namespace=gateway.payments inline_key=name"`
	// SuccessURL and CancelURL are where the provider sends the customer
	// after paying or giving up: the console's top-up page, as a rule.
	SuccessURL string `json:"success_url,omitempty"`
	CancelURL  string `json:"cancel_url,omitempty"`
	// Prices are what a user may buy, in the order shown.
	Prices []PaymentPriceConfig `json:"prices,omitempty"`
}

// PaymentPriceConfig is one item of the price list (payments.PriceConfig).
type PaymentPriceConfig = payments.PriceConfig

// parsePayments reads
//
//	payments <provider> {
//		success_url <url>
//		cancel_url <url>
//		prices {
//			<id> <amount> <currency> <credit units>
//		}
//		<the provider's own options>
//	}
//
// The provider's options are handed to its module's UnmarshalCaddyfile as
// a block of their own.
func parsePayments(d *caddyfile.Dispenser) (*PaymentsConfig, error) {
	if !d.NextArg() {
		return nil, d.Errf("payments takes a provider and a block: 'payments stripe { ... }'")
	}
	nameTok := d.Token()
	name := nameTok.Text
	if _, err := caddy.GetModule("gateway.payments." + name); err != nil {
		return nil, d.Errf("payments: unknown provider %q (known: %s)", name, strings.Join(knownProviders(), ", "))
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	c := &PaymentsConfig{}
	// the provider's block: its name, "{", its options' lines, "}"
	own := []caddyfile.Token{nameTok, {File: nameTok.File, Line: nameTok.Line, Text: "{"}}
	last := nameTok.Line
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "success_url", "cancel_url":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("payments: %s takes one URL", opt)
			}
			if opt == "success_url" {
				c.SuccessURL = v
			} else {
				c.CancelURL = v
			}
		case "prices":
			if d.NextArg() {
				return nil, d.Errf("payments: prices takes a block, one '<id> <amount> <currency> <credit units>' a line")
			}
			for inner := d.Nesting(); d.NextBlock(inner); {
				p, err := payments.ParsePrice(append([]string{d.Val()}, d.RemainingArgs()...))
				if err != nil {
					return nil, d.WrapErr(err)
				}
				c.Prices = append(c.Prices, p)
			}
		default:
			seg := d.NextSegment()
			own = append(own, seg...)
			last = seg[len(seg)-1].Line
		}
	}
	own = append(own, caddyfile.Token{File: nameTok.File, Line: last + 1, Text: "}"})
	pd := caddyfile.NewDispenser(own)
	pd.Next() // UnmarshalModule takes the segment from the current token
	unm, err := caddyfile.UnmarshalModule(pd, "gateway.payments."+name)
	if err != nil {
		return nil, err
	}
	c.ProviderRaw = caddyconfig.JSONModuleObject(unm, "name", name, nil)
	return c, nil
}

func knownProviders() []string {
	var names []string
	for _, m := range caddy.GetModules("gateway.payments") {
		names = append(names, m.ID.Name())
	}
	return names
}

// service loads the provider and builds the top-up service on the app's
// database; nil when top-up is not configured.
func (c *PaymentsConfig) service(ctx caddy.Context, a *App) (*payments.Service, error) {
	if c == nil {
		return nil, nil
	}
	if len(c.ProviderRaw) == 0 {
		return nil, fmt.Errorf("payments: no provider: write 'payments stripe { ... }'")
	}
	mod, err := ctx.LoadModule(c, "ProviderRaw")
	if err != nil {
		return nil, fmt.Errorf("payments: loading the provider: %w", err)
	}
	prov, ok := mod.(payments.Provider)
	if !ok {
		return nil, fmt.Errorf("payments: module %T is not a payment provider", mod)
	}
	name := mod.(caddy.Module).CaddyModule().ID.Name()
	items, err := payments.Items(c.Prices)
	if err != nil {
		return nil, err
	}
	repl := caddy.NewReplacer()
	return payments.New(payments.Config{
		Name: name, Provider: prov, Items: items,
		SuccessURL: repl.ReplaceAll(c.SuccessURL, ""), CancelURL: repl.ReplaceAll(c.CancelURL, ""),
		Store: a.db.Store, Credit: a.db.Ledger.Credit, Log: a.log.Named("payments"),
	})
}
