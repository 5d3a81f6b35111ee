package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

func (e Env) tokenAddCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "add --username <name> [--name <name>] [--quota <units> | --usd <USD>] [--models a,b] [--expires 720h] [--rpm N] [--tpm N] [--max-parallel N] [--management]",
		Short: "Creates an API key and prints it, alone, on stdout",
		Long: `Creates an API key for a user. The key is printed once and stored only as a hash.
A key reaches the model and task endpoints; with --management it also reaches
the account API (and, for an administrator, the admin API) as its owner's
login does.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			username, _ := cmd.Flags().GetString("username")
			name, _ := cmd.Flags().GetString("name")
			quota, err := money(cmd, "quota")
			if err != nil {
				return err
			}
			models, _ := cmd.Flags().GetString("models")
			expires, _ := cmd.Flags().GetString("expires")
			u, err := st.UserByName(ctx, username)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no user named %q: create it with 'caddy gateway user add'", username)
			}
			if err != nil {
				return fmt.Errorf("reading user %q: %w", username, err)
			}
			spec := account.TokenSpec{Name: name, QuotaLimit: quota, Models: strings.Split(models, ",")}
			spec.Management, _ = cmd.Flags().GetBool("management")
			if expires != "" {
				d, err := e.ParseDuration(expires)
				if err != nil || d <= 0 {
					return fmt.Errorf("--expires must be a positive duration such as 720h or 30d, not %q", expires)
				}
				spec.ExpiresAt = time.Now().Add(d)
			}
			if spec.Limits, err = newLimits(cmd); err != nil {
				return err
			}
			key, t, err := account.CreateToken(ctx, st, u.ID, spec)
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditKeyCreate, account.KeyTarget(t.ID), nil, account.AuditKey(t))
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		}),
	}
	c.Flags().String("username", "", "owner of the key")
	c.Flags().String("name", "", "a name to tell keys apart")
	c.Flags().Int64("quota", 0, "the key's own spending limit in units (0: only the user's quota applies)")
	usdFlag(c, "quota", "the key's own spending limit")
	c.Flags().String("models", "", "comma-separated models the key may use (default: all)")
	c.Flags().String("expires", "", "lifetime, e.g. 720h or 30d (default: never expires)")
	c.Flags().Bool("management", false, "a management key: it reaches the account and admin API as its owner's login does")
	limitFlags(c)
	required(c, "username")
	return c
}

func (e Env) tokenListCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "list --username <name>",
		Short: "Lists a user's API keys as a JSON array (prefixes only: keys are not stored)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			tokens, err := st.ListTokens(ctx, u.ID)
			if err != nil {
				return err
			}
			return printJSON(cmd, viewTokens(tokens))
		}),
	}
	c.Flags().String("username", "", "owner of the keys")
	required(c, "username")
	return c
}

// idFlag adds the required --id of a token to c.
func idFlag(c *cobra.Command) {
	c.Flags().Int64("id", 0, "token id (see 'caddy gateway token list')")
	required(c, "id")
}

// tokenWithID is the token --id names.
func tokenWithID(ctx context.Context, cmd *cobra.Command, st store.Store) (*store.Token, error) {
	id, _ := cmd.Flags().GetInt64("id")
	t, err := st.TokenByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no token with id %d", id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading token %d: %w", id, err)
	}
	return t, nil
}

func (e Env) tokenStatusCommand(verb, status string) *cobra.Command {
	c := &cobra.Command{
		Use:   verb + " --id <token id>",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + "s an API key (takes effect within the token cache TTL)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			t, err := tokenWithID(ctx, cmd, st)
			if err != nil {
				return err
			}
			before := account.AuditKey(t)
			if err := st.SetTokenStatus(ctx, t.ID, status); err != nil {
				return err
			}
			t.Status = status
			audit(ctx, cmd, st, account.AuditKeyUpdate, account.KeyTarget(t.ID), before, account.AuditKey(t))
			return printJSON(cmd, viewToken(t))
		}),
	}
	idFlag(c)
	return c
}

func (e Env) tokenSetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set --id <token id> [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Sets an API key's rate limits (0 clears one: the gateway's default applies)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			id, _ := cmd.Flags().GetInt64("id")
			change, err := limitsChange(cmd)
			if err != nil {
				return err
			}
			old, err := st.TokenByID(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no token with id %d", id)
			}
			if err != nil {
				return err
			}
			t, err := account.SetKeyLimits(ctx, st, account.Operator, id, change)
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditKeyUpdate, account.KeyTarget(t.ID), account.AuditKey(old), account.AuditKey(t))
			return printJSON(cmd, viewToken(t))
		}),
	}
	idFlag(c)
	limitFlags(c)
	return c
}

func (e Env) tokenRenameCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rename --id <token id> --name <name>",
		Short: "Renames an API key",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			name, _ := cmd.Flags().GetString("name")
			if strings.TrimSpace(name) == "" {
				return fmt.Errorf("--name must not be blank: %s", usageLine(cmd))
			}
			t, err := tokenWithID(ctx, cmd, st)
			if err != nil {
				return err
			}
			// everything but the name as it is
			spec := account.TokenSpec{Name: name, QuotaLimit: t.QuotaLimit, Models: t.Models, ExpiresAt: t.ExpiresAt, Limits: t.Limits}
			before := account.AuditKey(t)
			if t, err = account.UpdateToken(ctx, st, t.UserID, t.ID, spec, t.Status); err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditKeyUpdate, account.KeyTarget(t.ID), before, account.AuditKey(t))
			return printJSON(cmd, viewToken(t))
		}),
	}
	idFlag(c)
	c.Flags().String("name", "", "the new name")
	required(c, "name")
	return c
}

func (e Env) tokenDeleteCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "delete --id <token id>",
		Short: "Deletes an API key for good (its usage rows stay); it stops working within the token cache TTL",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			t, err := tokenWithID(ctx, cmd, st)
			if err != nil {
				return err
			}
			if t, err = account.DeleteToken(ctx, st, t.UserID, t.ID); err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditKeyDelete, account.KeyTarget(t.ID), account.AuditKey(t), nil)
			return printJSON(cmd, viewToken(t))
		}),
	}
	idFlag(c)
	return c
}
