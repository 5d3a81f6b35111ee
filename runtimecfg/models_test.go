package runtimecfg

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// The models listed are those served and priced, each with its price as
// configured; a served model without a price is left out.
func TestPricedModels(t *testing.T) {
	price := &billing.Price{Input: 2_000_000, Output: 10_000_000}
	channels := routing.NewSet([]*routing.Channel{{Name: "main", Type: "openai", Models: []string{"priced", "unpriced"}, Weight: 1}})
	got := PricedModels(channels, engine.NewPriceTable(map[string]*billing.Price{"priced": price, "unserved": price}))()
	if len(got) != 1 || got[0].ID != "priced" || got[0].Price != price || got[0].Chat != price.Chat() {
		t.Fatalf("models %+v", got)
	}
}
