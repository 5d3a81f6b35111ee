package billing

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func TestBatchPrice(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	u := adapters.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000, CachedTokens: 200_000}
	for _, tc := range []struct {
		name  string
		price Price
		want  int64
	}{
		{"no batch terms: the request price", Price{Input: 150_000, Output: 600_000}, 150_000 + 600_000},
		{"half off everything", Price{Input: 150_000, Output: 600_000, CachedInput: i(75_000), BatchDiscount: 50},
			// 800k uncached at 75000, 200k cached at 37500, 1M out at 300000
			60_000 + 7_500 + 300_000},
		{"explicit batch prices win over the discount", Price{Input: 150_000, Output: 600_000, BatchInput: i(10_000), BatchOutput: i(20_000), BatchDiscount: 50},
			// cached follows the batch input price when it has none of its own
			10_000 + 20_000},
		{"a discount rounds each price up", Price{Input: 3, Output: 1, BatchDiscount: 50}, 2 + 1},
		{"free stays free", Price{Free: true, BatchDiscount: 50}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.price.Batch().Cost(u); got != tc.want {
				t.Fatalf("Batch().Cost = %d, want %d", got, tc.want)
			}
		})
	}
}
