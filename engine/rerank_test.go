package engine

import (
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// A rerank reserves every document read beside the query, and the search
// units those pairs make up, at whichever prices the model has.
func TestRerankReservation(t *testing.T) {
	req := &adapters.RerankRequest{Query: strings.Repeat("q", 10), Documents: []string{strings.Repeat("d", 82), strings.Repeat("d", 1200)}}
	// pairs: 10+82+8 = 100 and 10+1200+8 = 1218 tokens, so 1318 tokens;
	// chunks of 500: 1 + 3 = 4, one search unit
	if got := RerankReservation(req, &billing.Price{Input: 2_000_000}); got != 2636 {
		t.Errorf("per-token reservation %d, want 2636", got)
	}
	if got := RerankReservation(req, &billing.Price{SearchUnit: 2000}); got != 2000 {
		t.Errorf("per-search reservation %d, want 2000", got)
	}
	many := &adapters.RerankRequest{Query: "q", Documents: make([]string, 250)}
	if got := RerankReservation(many, &billing.Price{SearchUnit: 2000}); got != 6000 {
		t.Errorf("250 documents reserve %d, want 3 search units (6000)", got)
	}
}
