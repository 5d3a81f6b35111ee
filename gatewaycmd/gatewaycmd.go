// Package gatewaycmd is the operator's commands, "caddy gateway user|token|
// redeem|usage ...": users, API keys, redemption codes and the usage
// export, run against the database directly, safe while the gateway serves.
//
// It must not import Caddy. The Caddy layer registers the command with
// caddycmd and gives, in an Env, what needs Caddy: opening the database its
// configuration names (read through Caddy's config adapters) and reading
// a duration as the Caddyfile does.
package gatewaycmd

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/store"
)

// Env is what the commands get from the server they are built into.
type Env struct {
	// OpenStore opens the database of the configuration the command's
	// flags name; the caller closes it.
	OpenStore func(cmd *cobra.Command) (store.Store, error)
	// ParseDuration reads a duration flag as the Caddyfile reads
	// durations (30d included).
	ParseDuration func(string) (time.Duration, error)
}

// AddCommands adds the user, token, redeem and usage commands to cmd.
func AddCommands(cmd *cobra.Command, e Env) {
	user := &cobra.Command{Use: "user", Short: "Manages users"}
	user.AddCommand(e.userAddCommand(), e.userShowCommand(), e.userPasswdCommand(), e.userSetCommand())
	token := &cobra.Command{Use: "token", Short: "Manages API keys"}
	token.AddCommand(e.tokenAddCommand(), e.tokenListCommand(), e.tokenSetCommand(), e.tokenStatusCommand("disable", store.TokenDisabled), e.tokenStatusCommand("enable", store.TokenEnabled))
	redeem := &cobra.Command{Use: "redeem", Short: "Manages redemption codes"}
	redeem.AddCommand(e.redeemAddCommand())
	usage := &cobra.Command{Use: "usage", Short: "Exports usage rows"}
	usage.AddCommand(e.usageExportCommand())
	cmd.AddCommand(user, token, redeem, usage)
}

func (e Env) withStore(run func(ctx context.Context, cmd *cobra.Command, st store.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		st, err := e.OpenStore(cmd)
		if err != nil {
			return err
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return run(ctx, cmd, st)
	}
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
