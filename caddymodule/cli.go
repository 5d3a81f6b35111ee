package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/gatewaycmd"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "gateway",
		Usage: "<user|token|redeem|usage> <add|show|passwd|export> [flags]",
		Short: "Manages the model gateway's users, keys and redemption codes",
		Long: `
Manages the model gateway's database directly: users, API keys (tokens) and
redemption codes. Each subcommand takes --config <Caddyfile> (default:
./Caddyfile) to find the database named by the gateway global option.
It is safe to run while the gateway is serving.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.PersistentFlags().StringP("config", "c", "", "Caddyfile (or JSON config) naming the gateway database")
			cmd.PersistentFlags().String("adapter", "", "config adapter (default: caddyfile, unless the file ends in .json)")
			gatewaycmd.AddCommands(cmd, gatewaycmd.Env{OpenStore: cliStore, ParseDuration: caddy.ParseDuration})
		},
	})
}

// cliStore opens the database the config names: the config is adapted
// and its placeholders replaced as the gateway itself would, which is why
// this stays in the Caddy layer.
func cliStore(cmd *cobra.Command) (store.Store, error) {
	path, _ := cmd.Flags().GetString("config")
	adapterName, _ := cmd.Flags().GetString("adapter")
	if path == "" {
		path = "Caddyfile"
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w (pass --config <Caddyfile>)", err)
	}
	if adapterName == "" && !strings.HasSuffix(path, ".json") {
		adapterName = "caddyfile"
	}
	if adapterName != "" {
		adapter := caddyconfig.GetAdapter(adapterName)
		if adapter == nil {
			return nil, fmt.Errorf("unknown config adapter %q", adapterName)
		}
		body, _, err = adapter.Adapt(body, map[string]any{"filename": path})
		if err != nil {
			return nil, fmt.Errorf("adapting config %s: %w", path, err)
		}
	}
	var cfg struct {
		Apps struct {
			Gateway struct {
				Database *DatabaseConfig `json:"database"`
			} `json:"gateway"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, err)
	}
	dbc := DatabaseConfig{Driver: "sqlite", DSN: "./data/gateway.db"}
	if c := cfg.Apps.Gateway.Database; c != nil {
		repl := caddy.NewReplacer()
		if c.Driver != "" {
			dbc.Driver = c.Driver
		}
		if c.DSN != "" {
			dbc.DSN = repl.ReplaceAll(c.DSN, "")
		}
	}
	st, err := store.Open(dbc.Driver, dbc.DSN)
	if err != nil {
		return nil, err
	}
	if err := account.BootstrapRoot(context.Background(), st, caddy.Log().Named("gateway"), os.Stderr); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
