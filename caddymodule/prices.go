package caddymodule

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

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

// PriceFileConfig is a price catalogue on disk (billing.ReadCatalogue's
// formats): `prices_file <path> [<model glob>...]`. It is read at every
// load, so a reload takes its changes; it is never fetched.
type PriceFileConfig struct {
	Path string `json:"path"`
	// Format is gateway or litellm; empty detects it
	Format string `json:"format,omitempty"`
	// Models keeps the catalogue's models matching one of these globs;
	// empty keeps every model
	Models []string `json:"models,omitempty"`
}

// parsePriceFile reads `prices_file <path> [<model glob>...] [{ format
// gateway|litellm }]`.
func parsePriceFile(d *caddyfile.Dispenser) (PriceFileConfig, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return PriceFileConfig{}, d.Errf("prices_file needs a file: 'prices_file <path> [<model glob>...]'")
	}
	pf := PriceFileConfig{Path: args[0], Models: args[1:]}
	for _, g := range pf.Models {
		if _, err := path.Match(g, ""); err != nil {
			return pf, d.Errf("prices_file %s: bad model glob %q: %v", pf.Path, g, err)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "format" || !d.Args(&pf.Format) || d.NextArg() ||
			(pf.Format != billing.CatalogueGateway && pf.Format != billing.CatalogueLiteLLM) {
			return pf, d.Errf("prices_file %s: its block takes 'format %s' or 'format %s'", pf.Path, billing.CatalogueGateway, billing.CatalogueLiteLLM)
		}
	}
	return pf, nil
}

// provisionPriceFiles prices, from the catalogues, the models the
// configuration's own price blocks do not (those win); the first file
// that prices a model wins over later ones. A bad entry of a model the
// file is kept to fails the load; other models' are not looked at.
func (a *App) provisionPriceFiles() error {
	for _, pf := range a.PriceFiles {
		data, err := os.ReadFile(pf.Path)
		if err != nil {
			return fmt.Errorf("prices_file: %w", err)
		}
		if len(data) > billing.MaxCatalogueSize {
			return fmt.Errorf("prices_file %s: %d bytes, more than the %d a catalogue may be", pf.Path, len(data), billing.MaxCatalogueSize)
		}
		entries, bad := billing.ReadCatalogue(data, pf.Format)
		if bad != nil && !errors.As(bad, new(*billing.CatalogueError)) {
			return fmt.Errorf("prices_file %s: %w", pf.Path, bad)
		}
		for _, err := range unjoined(bad) {
			var ce *billing.CatalogueError
			if errors.As(err, &ce) && matchesAny(pf.Models, ce.Model) {
				return fmt.Errorf("prices_file %s: %w", pf.Path, err)
			}
		}
		n := 0
		for _, e := range entries {
			if !matchesAny(pf.Models, e.Model) {
				continue
			}
			if _, own := a.prices[e.Model]; own {
				continue
			}
			p, err := e.Price()
			if err != nil {
				return fmt.Errorf("prices_file %s: model %s: %w", pf.Path, e.Model, err)
			}
			a.prices[e.Model] = p
			n++
		}
		a.log.Info("prices read from a catalogue", zap.String("file", pf.Path), zap.Int("models", n))
	}
	return nil
}

// matchesAny reports whether model matches one of globs (none: all).
func matchesAny(globs []string, model string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

func unjoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
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

// cliPrices are the prices of the config the command names (found as
// cliDatabase finds it), its catalogues included; nil when there is no
// config.
func cliPrices(cmd *cobra.Command) (map[string]*billing.Price, error) {
	if path, _ := cmd.Flags().GetString("config"); path == "" {
		if _, err := os.Stat("Caddyfile"); err != nil {
			return nil, errors.New("no Caddyfile in the current directory: pass --config with the Caddyfile the gateway runs with")
		}
	}
	body, path, err := cliConfig(cmd)
	if err != nil || body == nil {
		return nil, err
	}
	var cfg struct {
		Apps struct {
			Gateway App `json:"gateway"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, fmt.Errorf("reading the prices of %s: %w", path, err)
	}
	a := &cfg.Apps.Gateway
	a.log = zap.NewNop()
	if err := a.provisionPrices(); err != nil {
		return nil, fmt.Errorf("the prices of %s: %w", path, err)
	}
	return a.prices, nil
}

func (a *App) provisionPrices() error {
	a.prices = make(map[string]*billing.Price, len(a.Prices))
	for model, pc := range a.Prices {
		p, err := pc.price()
		if err != nil {
			return fmt.Errorf("price %s: %w", model, err)
		}
		a.prices[model] = p
	}
	return a.provisionPriceFiles()
}

func (pc *PriceConfig) price() (*billing.Price, error) {
	if pc.MaxOutput < 0 {
		return nil, fmt.Errorf("max_output must not be negative")
	}
	p := &billing.Price{Free: pc.Free, MaxOutput: pc.MaxOutput}
	parse := func(name, s string) (int64, error) {
		if s == "" {
			return 0, nil
		}
		v, err := billing.ParseUSD(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
	var err error
	if p.Input, err = parse("input", pc.Input); err != nil {
		return nil, err
	}
	if p.Output, err = parse("output", pc.Output); err != nil {
		return nil, err
	}
	if pc.CachedInput != "" {
		v, err := parse("cached_input", pc.CachedInput)
		if err != nil {
			return nil, err
		}
		p.CachedInput = &v
	}
	if pc.CacheWrite != "" {
		v, err := parse("cache_write", pc.CacheWrite)
		if err != nil {
			return nil, err
		}
		p.CacheWrite = &v
	}
	if err := pc.tierPrices(p, parse); err != nil {
		return nil, err
	}
	for name, field := range map[string]struct {
		s   string
		dst **int64
	}{"audio_input": {pc.AudioInput, &p.AudioInput}, "audio_output": {pc.AudioOutput, &p.AudioOutput}} {
		if field.s != "" {
			v, err := parse(name, field.s)
			if err != nil {
				return nil, err
			}
			*field.dst = &v
		}
	}
	// per-request and per-search-unit prices are USD, the others USD per
	// million tokens
	if p.Request, err = parse("request", pc.Request); err != nil {
		return nil, err
	}
	if p.SearchUnit, err = parse("search_unit", pc.SearchUnit); err != nil {
		return nil, err
	}
	if err := pc.mediaPrice(p, parse); err != nil {
		return nil, err
	}
	if p.Task, err = parse("task", pc.Task); err != nil {
		return nil, err
	}
	if p.VideoSecond, err = parse("video_second", pc.VideoSecond); err != nil {
		return nil, err
	}
	if pc.MaxSeconds < 0 {
		return nil, fmt.Errorf("max_seconds must not be negative")
	}
	p.MaxSeconds = pc.MaxSeconds
	if err := pc.batchPrice(p, parse); err != nil {
		return nil, err
	}
	if p.VideoSecond > 0 && p.MaxSeconds == 0 {
		return nil, fmt.Errorf("video_second needs max_seconds, the longest video the vendor makes: a task that names no duration reserves it")
	}
	return p, nil
}
