package caddymodule

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/store"
)

// limitFlags adds --rpm, --tpm and --max-parallel to a command.
func limitFlags(c *cobra.Command) {
	c.Flags().Int64("rpm", 0, "requests a minute (0: the gateway's default)")
	c.Flags().Int64("tpm", 0, "tokens a minute, prompt and completion (0: the gateway's default)")
	c.Flags().Int64("max-parallel", 0, "requests at once (0: the gateway's default)")
}

// readLimits returns l with the limit flags the command was given set.
func readLimits(cmd *cobra.Command, l store.Limits) (store.Limits, error) {
	for _, f := range []struct {
		name string
		into *int64
	}{{"rpm", &l.RPM}, {"tpm", &l.TPM}, {"max-parallel", &l.MaxParallel}} {
		if !cmd.Flags().Changed(f.name) {
			continue
		}
		v, _ := cmd.Flags().GetInt64(f.name)
		if v < 0 {
			return l, fmt.Errorf("--%s must not be negative", f.name)
		}
		*f.into = v
	}
	return l, nil
}

func userSetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set --username <name> [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Sets a user's rate limits, over all of their keys (0 clears one)",
		RunE: withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			name, _ := cmd.Flags().GetString("username")
			u, err := st.UserByName(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no user named %q", name)
			}
			if err != nil {
				return err
			}
			if u.Limits, err = readLimits(cmd, u.Limits); err != nil {
				return err
			}
			if err := st.SetUserLimits(ctx, u.ID, u.Limits); err != nil {
				return err
			}
			return printJSON(cmd, viewUser(u))
		}),
	}
	c.Flags().String("username", "", "user name")
	limitFlags(c)
	return c
}

func tokenSetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set --id <token id> [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Sets an API key's rate limits (0 clears one: the gateway's default applies)",
		RunE: withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			id, _ := cmd.Flags().GetInt64("id")
			t, err := st.TokenByID(ctx, id)
			if err != nil {
				return fmt.Errorf("no token with id %d: %w", id, err)
			}
			if t.Limits, err = readLimits(cmd, t.Limits); err != nil {
				return err
			}
			if err := st.SetTokenLimits(ctx, id, t.Limits); err != nil {
				return err
			}
			return printJSON(cmd, t)
		}),
	}
	c.Flags().Int64("id", 0, "token id (see 'caddy gateway token list')")
	limitFlags(c)
	return c
}
