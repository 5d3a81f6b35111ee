package gatewaycmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/billing"
)

// pricesImportCommand prints a catalogue file's prices as Caddyfile price
// blocks (or the operator's own JSON), for the operator to read and paste:
// prices change what users pay, so nothing is applied or fetched here.
func (e Env) pricesImportCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "import <file> [--format auto|gateway|litellm] [--model <glob>]... [--output caddyfile|json] [--diff]",
		Short: "Prints a price catalogue file's prices as Caddyfile price blocks",
		Long: `Reads a price catalogue saved on disk (never fetched: download the public
catalogue yourself and check it) and prints its token prices as Caddyfile
'price' blocks to paste into the gateway block, or as the gateway's own
catalogue JSON (--output json). Two shapes are read (docs/prices.md):
the gateway's own JSON, an object of models whose values are the options
of a price block (USD strings), and the public catalogue's
model_prices_and_context_window.json shape (USD per token as numbers).
--model keeps the models matching a glob (repeat it for several). --diff
compares with the prices of the config (--config, or ./Caddyfile) and
prints only the models that are new or priced differently, each after a
comment saying what changed. An entry that cannot be read is named on
stderr with what is wrong, and the command exits non-zero after printing
the rest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := cmd.Flags().GetString("format")
			globs, _ := cmd.Flags().GetStringArray("model")
			output, _ := cmd.Flags().GetString("output")
			diff, _ := cmd.Flags().GetBool("diff")
			if format == "auto" {
				format = ""
			}
			if output != "caddyfile" && output != "json" {
				return fmt.Errorf("--output must be caddyfile or json, not %q", output)
			}
			for _, g := range globs {
				if _, err := path.Match(g, ""); err != nil {
					return fmt.Errorf("--model %q: %w", g, err)
				}
			}
			var current map[string]*billing.Price
			if diff {
				if output != "caddyfile" {
					return errors.New("--diff prints Caddyfile price blocks: leave out --output json")
				}
				var err error
				if e.Prices != nil {
					current, err = e.Prices(cmd)
				}
				if err != nil {
					return err
				}
				if current == nil {
					return errors.New("--diff needs the config to compare with: pass --config <Caddyfile>")
				}
			}
			data, err := readCatalogueFile(args[0])
			if err != nil {
				return err
			}
			entries, bad := billing.ReadCatalogue(data, format)
			if bad != nil && !errors.As(bad, new(*billing.CatalogueError)) {
				return fmt.Errorf("%s: %w", args[0], bad)
			}
			var errs []error
			for _, err := range unjoin(bad) {
				if wanted(globs, catalogueModelOf(err)) {
					errs = append(errs, err)
				}
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			kept := map[string]*billing.CatalogueEntry{}
			unchanged := 0
			for _, en := range entries {
				if !wanted(globs, en.Model) {
					continue
				}
				kept[en.Model] = en
				if diff {
					note, same := priceDiff(current[en.Model], en)
					if same {
						unchanged++
						continue
					}
					fmt.Fprint(out, note)
				}
				if output == "caddyfile" {
					fmt.Fprint(out, en.Caddyfile())
				}
			}
			if diff {
				fmt.Fprintf(out, "# %d of the %d models read are priced the same in the config\n", unchanged, len(kept))
			}
			if output == "json" {
				b, _ := json.MarshalIndent(kept, "", "  ")
				out.Write(append(b, '\n'))
			}
			if err := out.Flush(); err != nil {
				return err
			}
			if len(kept) == 0 && len(errs) == 0 {
				return fmt.Errorf("%s: no model priced by tokens matches %v", args[0], globs)
			}
			for _, err := range errs {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", args[0], err)
			}
			if len(errs) > 0 {
				return fmt.Errorf("%s: %d entries could not be read (listed above); the others are printed", args[0], len(errs))
			}
			return nil
		},
	}
	c.Flags().String("format", "auto", "the catalogue's shape: auto, gateway or litellm")
	c.Flags().StringArray("model", nil, "keep only the models matching this glob (repeatable)")
	c.Flags().String("output", "caddyfile", "caddyfile (price blocks) or json (the gateway's own catalogue)")
	c.Flags().Bool("diff", false, "print only the models new to the config or priced differently there, saying what changed")
	return c
}

// readCatalogueFile reads a catalogue within billing.MaxCatalogueSize.
func readCatalogueFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, billing.MaxCatalogueSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, nil
}

// wanted reports whether model matches one of globs (none: every model).
func wanted(globs []string, model string) bool {
	if len(globs) == 0 || model == "" {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// catalogueModelOf is the model a catalogue error names.
func catalogueModelOf(err error) string {
	var ce *billing.CatalogueError
	if errors.As(err, &ce) {
		return ce.Model
	}
	return ""
}

// priceDiff says, as Caddyfile comments, how the catalogue's entry differs
// from the config's price cur (nil: none), and whether it does not.
func priceDiff(cur *billing.Price, en *billing.CatalogueEntry) (note string, same bool) {
	next, err := en.Price()
	if err != nil {
		return "# " + en.Model + ": " + err.Error() + "\n", false
	}
	if cur == nil {
		return "# new: " + en.Model + " has no price in the config\n", false
	}
	var changes []string
	opt := func(p *int64) string {
		if p == nil {
			return "unset"
		}
		return usd(*p)
	}
	for _, f := range []struct{ name, was, now string }{
		{"free", fmt.Sprint(cur.Free), fmt.Sprint(next.Free)},
		{"input", usd(cur.Input), usd(next.Input)},
		{"output", usd(cur.Output), usd(next.Output)},
		{"cached_input", opt(cur.CachedInput), opt(next.CachedInput)},
		{"cache_write", opt(cur.CacheWrite), opt(next.CacheWrite)},
		{"cache_write_1h", opt(cur.CacheWrite1h), opt(next.CacheWrite1h)},
		{"request", usd(cur.Request), usd(next.Request)},
		{"max_output", fmt.Sprint(cur.MaxOutput), fmt.Sprint(next.MaxOutput)},
		{"tiers", tiersText(cur.Tiers, opt), tiersText(next.Tiers, opt)},
	} {
		if f.was != f.now {
			changes = append(changes, f.name+" "+f.was+" -> "+f.now)
		}
	}
	if len(changes) == 0 {
		return "", true
	}
	note = "# changed: " + en.Model + ": " + strings.Join(changes, "; ") + "\n"
	if len(cur.Images) > 0 || cur.ImageInput != nil || cur.AudioInput != nil || cur.AudioOutput != nil || cur.SearchUnit > 0 ||
		cur.AudioSecond > 0 || cur.Characters > 0 || cur.Task > 0 || cur.VideoSecond > 0 {
		note += "# the config's price of " + en.Model + " has options a catalogue does not carry (audio, images, search, tasks): keep them\n"
	}
	return note, false
}

// usd writes quota units as a decimal of USD.
func usd(units int64) string {
	s := new(big.Rat).SetFrac64(units, billing.UnitsPerUSD).FloatString(6)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func tiersText(tiers []billing.PriceTier, opt func(*int64) string) string {
	if len(tiers) == 0 {
		return "none"
	}
	var parts []string
	for _, t := range tiers {
		parts = append(parts, fmt.Sprintf("above %d {input %s output %s cached_input %s cache_write %s cache_write_1h %s}",
			t.Above, usd(t.Input), usd(t.Output), opt(t.CachedInput), opt(t.CacheWrite), opt(t.CacheWrite1h)))
	}
	return strings.Join(parts, ", ")
}
