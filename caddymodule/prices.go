package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

// The configuration's price structs are billing's, which converts them
// (billing/priceconfig.go); caddymodule reads them from the Caddyfile.
type (
	// PriceConfig is a model's price: `price <model> { ... }`.
	PriceConfig = billing.PriceConfig
	// PriceTierConfig is a tier of a price: `above <tokens> { input <usd>
	// output <usd> ... }`.
	PriceTierConfig = billing.TierConfig
	// ImagePriceConfig is one `image [<size> [<quality>]] <usd>` line.
	ImagePriceConfig = billing.ImagePriceConfig
	// PriceFileConfig is `prices_file <path> [<model glob>...]`.
	PriceFileConfig = billing.PriceFile
)

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
		if err := tc.Set(opt, v); err != nil {
			return d.Errf("price %s: above %d: %v", model, n, err)
		}
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

// provisionPrices converts the configuration's prices, then prices from
// the catalogues the models those do not price (billing.BuildPrices).
func (a *App) provisionPrices() error {
	prices, err := billing.BuildPrices(a.Prices, a.PriceFiles, a.log)
	if err != nil {
		return err
	}
	a.prices = prices
	return nil
}
