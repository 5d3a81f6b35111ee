package caddymodule

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

// PriceTierConfig is a tier of a price: `above <tokens> { input <usd>
// output <usd> ... }`.
type PriceTierConfig = billing.TierConfig

// tierPrices fills p's 1-hour cache write price and its tiers.
func (pc *PriceConfig) tierPrices(p *billing.Price, parse func(name, s string) (int64, error)) error {
	optional := func(name, s string) (*int64, error) {
		if s == "" {
			return nil, nil
		}
		v, err := parse(name, s)
		return &v, err
	}
	var err error
	if p.CacheWrite1h, err = optional("cache_write_1h", pc.CacheWrite1h); err != nil {
		return err
	}
	for _, tc := range pc.Tiers {
		if tc.Input == "" || tc.Output == "" {
			return fmt.Errorf("above %d: a tier needs both its input and output prices", tc.Above)
		}
		t := billing.PriceTier{Above: tc.Above}
		for _, f := range []struct {
			name, s string
			dst     *int64
		}{{"input", tc.Input, &t.Input}, {"output", tc.Output, &t.Output}} {
			if *f.dst, err = parse(f.name, f.s); err != nil {
				return fmt.Errorf("above %d: %w", tc.Above, err)
			}
		}
		for _, f := range []struct {
			name, s string
			dst     **int64
		}{{"cached_input", tc.CachedInput, &t.CachedInput}, {"cache_write", tc.CacheWrite, &t.CacheWrite}, {"cache_write_1h", tc.CacheWrite1h, &t.CacheWrite1h}} {
			if *f.dst, err = optional(f.name, f.s); err != nil {
				return fmt.Errorf("above %d: %w", tc.Above, err)
			}
		}
		p.Tiers = append(p.Tiers, t)
	}
	slices.SortFunc(p.Tiers, func(a, b billing.PriceTier) int { return cmp.Compare(a.Above, b.Above) })
	return p.CheckTiers()
}

// parsePriceTier reads `above <tokens> { input <usd> output <usd>
// [cached_input|cache_write|cache_write_1h <usd>] }`.
func parsePriceTier(d *caddyfile.Dispenser, model string, pc *PriceConfig) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("price %s: above takes the prompt length in tokens and a block: 'above 200000 { input <usd> output <usd> }'", model)
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return d.Errf("price %s: above %s: the threshold must be a positive number of prompt tokens", model, args[0])
	}
	tc := PriceTierConfig{Above: n}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.Errf("price %s: above %d: %s takes one price in USD per million tokens", model, n, opt)
		}
		dst := map[string]*string{"input": &tc.Input, "output": &tc.Output, "cached_input": &tc.CachedInput,
			"cache_write": &tc.CacheWrite, "cache_write_1h": &tc.CacheWrite1h}[opt]
		if dst == nil {
			return d.Errf("price %s: above %d: unrecognized option %q (a tier has input, output, cached_input, cache_write, cache_write_1h)", model, n, opt)
		}
		if _, err := billing.ParseUSD(v); err != nil {
			return d.Errf("price %s: above %d: %s: %v", model, n, opt, err)
		}
		*dst = v
	}
	if tc.Input == "" || tc.Output == "" {
		return d.Errf("price %s: above %d: a tier needs both its input and output prices", model, n)
	}
	pc.Tiers = append(pc.Tiers, tc)
	return nil
}
