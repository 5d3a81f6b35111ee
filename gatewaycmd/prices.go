package gatewaycmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/billing"
)

// pricesImportCommand prints a catalogue file's prices as Caddyfile price
// blocks (or the operator's own JSON), for the operator to read and paste:
// prices change what users pay, so nothing is applied or fetched here.
func (e Env) pricesImportCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "import <file> [--format auto|gateway|litellm] [--model <glob>]... [--output caddyfile|json]",
		Short: "Prints a price catalogue file's prices as Caddyfile price blocks",
		Long: `Reads a price catalogue saved on disk (never fetched: download the public
catalogue yourself and check it) and prints its token prices as Caddyfile
'price' blocks to paste into the gateway block, or as the gateway's own
catalogue JSON (--output json). Two shapes are read (docs/prices.md):
the gateway's own JSON, an object of models whose values are the options
of a price block (USD strings), and the public catalogue's
model_prices_and_context_window.json shape (USD per token as numbers).
--model keeps the models matching a glob (repeat it for several). An entry
that cannot be read is named on stderr with what is wrong, and the command
exits non-zero after printing the rest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := cmd.Flags().GetString("format")
			globs, _ := cmd.Flags().GetStringArray("model")
			output, _ := cmd.Flags().GetString("output")
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
			for _, en := range entries {
				if !wanted(globs, en.Model) {
					continue
				}
				kept[en.Model] = en
				if output == "caddyfile" {
					fmt.Fprint(out, en.Caddyfile())
				}
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
