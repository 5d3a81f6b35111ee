package billing

import (
	"fmt"
)

// PriceTier is the token prices of a prompt longer than Above tokens
// (Gemini 2.5 Pro and Claude's 1M context charge more above 200,000):
// the whole request, prompt and completion, is billed at the tier its
// prompt reached, not only the tokens past the threshold. The prompt is
// every input token, cached and cache-written ones included, as the
// vendors count it. Prices are per million tokens, in quota units; a nil
// cache price falls back within the tier as on Price (CacheWrite1h to
// CacheWrite, that and CachedInput to Input). Audio, media and
// flat prices have no tiers: the base price's apply.
type PriceTier struct {
	// Above is the prompt length in tokens beyond which the tier applies
	// (a prompt of exactly Above tokens is not in it).
	Above        int64  `json:"above"`
	Input        int64  `json:"input"`
	Output       int64  `json:"output"`
	CachedInput  *int64 `json:"cached_input,omitempty"`
	CacheWrite   *int64 `json:"cache_write,omitempty"`
	CacheWrite1h *int64 `json:"cache_write_1h,omitempty"`
}

// TierConfig is a PriceTier as the configuration and catalogues give it:
// USD per million tokens as exact decimal strings. Unset cache prices are
// the tier's input price.
type TierConfig struct {
	Above        int64  `json:"above"`
	Input        string `json:"input"`
	Output       string `json:"output"`
	CachedInput  string `json:"cached_input,omitempty"`
	CacheWrite   string `json:"cache_write,omitempty"`
	CacheWrite1h string `json:"cache_write_1h,omitempty"`
}

// tier is the index of the tier a prompt of n tokens is billed at, -1
// for the base prices.
func (p *Price) tier(n int64) int {
	i := -1
	for j := range p.Tiers {
		if n > p.Tiers[j].Above {
			i = j
		}
	}
	return i
}

// At is the price a prompt of n tokens is billed at: p with the token
// prices of the tier n reaches, and no tiers (a copy: p is shared).
func (p *Price) At(n int64) Price {
	q := *p
	q.Tiers = nil
	if i := p.tier(n); i >= 0 {
		t := &p.Tiers[i]
		q.Input, q.Output = t.Input, t.Output
		q.CachedInput, q.CacheWrite, q.CacheWrite1h = t.CachedInput, t.CacheWrite, t.CacheWrite1h
	}
	return q
}

// TierAbove names the tier a prompt of n tokens is billed at, as its usage
// row records it: the tier's Above, 0 for the base prices.
func (p *Price) TierAbove(n int64) int64 {
	if p == nil {
		return 0
	}
	if i := p.tier(n); i >= 0 {
		return p.Tiers[i].Above
	}
	return 0
}

// CheckTiers reports a tier list that cannot be billed by: thresholds
// that are not positive and strictly ascending.
func (p *Price) CheckTiers() error {
	last := int64(0)
	for _, t := range p.Tiers {
		if t.Above <= last {
			if t.Above <= 0 {
				return fmt.Errorf("tier above %d: the threshold must be a positive number of prompt tokens", t.Above)
			}
			return fmt.Errorf("tier above %d: tiers must ascend by threshold, each threshold once", t.Above)
		}
		last = t.Above
	}
	return nil
}
