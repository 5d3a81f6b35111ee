package caddymodule

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// limitFlags adds --rpm, --tpm and --max-parallel to a command.
func limitFlags(c *cobra.Command) {
	c.Flags().Int64("rpm", 0, "requests a minute (0: the gateway's default)")
	c.Flags().Int64("tpm", 0, "tokens a minute, prompt and completion (0: the gateway's default)")
	c.Flags().Int64("max-parallel", 0, "requests at once (0: the gateway's default)")
}

// limitsChange is the change the limit flags the command was given ask
// for; a negative value is refused by its flag's name.
func limitsChange(cmd *cobra.Command) (account.LimitsChange, error) {
	var c account.LimitsChange
	for _, f := range []struct {
		name string
		into **int64
	}{{"rpm", &c.RPM}, {"tpm", &c.TPM}, {"max-parallel", &c.MaxParallel}} {
		if !cmd.Flags().Changed(f.name) {
			continue
		}
		v, _ := cmd.Flags().GetInt64(f.name)
		if v < 0 {
			return c, fmt.Errorf("--%s must not be negative", f.name)
		}
		*f.into = &v
	}
	return c, nil
}

// newLimits are the limits the flags give something new.
func newLimits(cmd *cobra.Command) (store.Limits, error) {
	c, err := limitsChange(cmd)
	if err != nil {
		return store.Limits{}, err
	}
	return c.Apply(store.Limits{})
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
			change, err := limitsChange(cmd)
			if err != nil {
				return err
			}
			if u, err = account.UpdateUser(ctx, st, account.Operator, u.ID, account.UserChange{Limits: &change}); err != nil {
				return err
			}
			return printJSON(cmd, account.ViewUser(u))
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
			change, err := limitsChange(cmd)
			if err != nil {
				return err
			}
			t, err := account.SetKeyLimits(ctx, st, account.Operator, id, change)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no token with id %d: %w", id, err)
			}
			if err != nil {
				return err
			}
			return printJSON(cmd, t)
		}),
	}
	c.Flags().Int64("id", 0, "token id (see 'caddy gateway token list')")
	limitFlags(c)
	return c
}
