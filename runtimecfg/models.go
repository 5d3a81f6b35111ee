package runtimecfg

import (
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// PricedModels lists the models a caller can ask for, in the account
// API's terms: served by channels and priced by prices, each with its
// price as configured (shared, not copied: the price table is built once
// when the app is provisioned and only read after).
func PricedModels(channels *routing.Set, prices *engine.PriceTable) func() []accountapi.Model {
	return func() []accountapi.Model {
		var out []accountapi.Model
		for _, m := range channels.Models() {
			if p, ok := prices.Get(m); ok {
				out = append(out, accountapi.Model{ID: m, Chat: p.Chat(), Price: p})
			}
		}
		return out
	}
}
