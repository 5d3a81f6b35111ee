package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/gatewaycmd"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "gateway",
		Usage: "<user|token|redeem|usage|audit|secrets|prices> <command> [--config <Caddyfile>] [flags]",
		Short: "Manages the model gateway's users, keys and redemption codes",
		Long: `
Manages the model gateway's database directly: users, API keys (tokens),
redemption codes and the usage export. It is safe to run while the gateway
is serving.

The database is the one the gateway global option of the config names. The
config is found as 'caddy run' finds it: --config, or else the Caddyfile in
the current directory; with neither, the gateway's default database
(` + defaultDSN + `) is used if it exists.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.PersistentFlags().StringP("config", "c", "", "Caddyfile (or JSON config) naming the gateway database (default: ./Caddyfile)")
			cmd.PersistentFlags().String("adapter", "", "config adapter (default: caddyfile, unless the file ends in .json)")
			gatewaycmd.AddCommands(cmd, gatewaycmd.Env{OpenStore: cliStore, ParseDuration: caddy.ParseDuration, Known: cliKnown, Prices: cliPrices,
				Expand: func(s string) string { return caddy.NewReplacer().ReplaceAll(s, "") }})
		},
	})
}

// defaultDSN is the database of a gateway whose config names none.
const defaultDSN = "./data/gateway.db"

// cliStore opens the database the config names: the config is adapted
// and its placeholders replaced as the gateway itself would, which is why
// this stays in the Caddy layer.
func cliStore(cmd *cobra.Command) (store.Store, error) {
	dbc, _, err := cliDatabase(cmd)
	if err != nil {
		return nil, err
	}
	return gatewaycmd.OpenDatabase(dbc.Driver, dbc.DSN, caddy.Log().Named("gateway"), os.Stderr)
}

// cliDatabase finds the config as Caddy's own commands do (--config, or
// else ./Caddyfile) and reads which database it names. With no config at
// all, like 'caddy run' it takes the defaults: the gateway's default
// database, when it exists, so that a command typed in the directory the
// gateway runs in finds its database; it never creates one on a guess.
//
// It also returns the plans and budget groups the config defines, for the
// commands that assign them; nil when no config was read (names then go
// unchecked).
func cliDatabase(cmd *cobra.Command) (DatabaseConfig, *gatewaycmd.ConfigBudgets, error) {
	dbc := DatabaseConfig{Driver: "sqlite", DSN: defaultDSN}
	body, path, err := cliConfig(cmd)
	if err != nil || body == nil {
		return dbc, nil, err
	}
	var cfg struct {
		Apps struct {
			Gateway struct {
				Database *DatabaseConfig          `json:"database"`
				Budgets  gatewaycmd.ConfigBudgets `json:"budgets"`
			} `json:"gateway"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return dbc, nil, fmt.Errorf("reading config %s: %w", path, err)
	}
	if c := cfg.Apps.Gateway.Database; c != nil {
		repl := caddy.NewReplacer()
		if c.Driver != "" {
			dbc.Driver = c.Driver
		}
		if c.DSN != "" {
			dbc.DSN = repl.ReplaceAll(c.DSN, "")
		}
	}
	return dbc, &cfg.Apps.Gateway.Budgets, nil
}

// cliConfig is the config, adapted to JSON, that cliDatabase describes
// finding, and its path; nil when there is none and the default database
// stands.
func cliConfig(cmd *cobra.Command) ([]byte, string, error) {
	path, _ := cmd.Flags().GetString("config")
	adapterName, _ := cmd.Flags().GetString("adapter")
	if path == "" {
		if adapterName != "" {
			return nil, "", errors.New("--adapter needs --config: the file to adapt")
		}
		path = "Caddyfile"
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(defaultDSN); err != nil {
				return nil, "", errors.New("no Caddyfile in the current directory: pass --config with the Caddyfile the gateway runs with")
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "no ./Caddyfile: using the default database %s (--config names another)\n", defaultDSN)
			return nil, "", nil
		}
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("reading config: %w (pass --config <Caddyfile>)", err)
	}
	if adapterName == "" && !strings.HasSuffix(path, ".json") {
		adapterName = "caddyfile"
	}
	if adapterName != "" {
		adapter := caddyconfig.GetAdapter(adapterName)
		if adapter == nil {
			return nil, "", fmt.Errorf("unknown config adapter %q", adapterName)
		}
		body, _, err = adapter.Adapt(body, map[string]any{"filename": path})
		if err != nil {
			return nil, "", fmt.Errorf("adapting config %s: %w", path, err)
		}
	}
	return body, path, nil
}

// cliKnown says whether the config names a plan or a budget group, or
// the database keeps a plan made at runtime of that name; nil when the
// command read no config.
func cliKnown(cmd *cobra.Command) (func(kind, name string) bool, error) {
	dbc, b, err := cliDatabase(cmd)
	if err != nil || b == nil {
		return nil, err
	}
	return b.Known(dbc.Driver, dbc.DSN), nil
}
