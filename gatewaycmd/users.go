package gatewaycmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

func (e Env) userAddCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "add --username <name> --password <password> [--role user|admin|root] [--quota <units>] [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Creates a user",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			var n account.NewUser
			n.Username, _ = cmd.Flags().GetString("username")
			n.Password, _ = cmd.Flags().GetString("password")
			n.Role, _ = cmd.Flags().GetString("role")
			n.Quota, _ = cmd.Flags().GetInt64("quota")
			var err error
			if n.Limits, err = newLimits(cmd); err != nil {
				return err
			}
			u, err := account.CreateUser(ctx, st, account.Operator, n)
			if err != nil {
				return err
			}
			return printJSON(cmd, account.ViewUser(u))
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("password", "", "password (8 characters or more)")
	c.Flags().String("role", store.RoleUser, "user, admin or root")
	c.Flags().Int64("quota", 0, "starting quota in units (1,000,000 = 1 USD)")
	limitFlags(c)
	return c
}

func (e Env) userShowCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "show --username <name>",
		Short: "Prints a user's quota, used quota and invitation quota as JSON",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			name, _ := cmd.Flags().GetString("username")
			u, err := st.UserByName(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no user named %q", name)
			}
			if err != nil {
				return err
			}
			return printJSON(cmd, account.ViewUser(u))
		}),
	}
	c.Flags().String("username", "", "user name")
	return c
}

func (e Env) userPasswdCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "passwd --username <name> [--password <password>]",
		Short: "Sets a user's password (a random one, printed, if none is given)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			name, _ := cmd.Flags().GetString("username")
			password, _ := cmd.Flags().GetString("password")
			u, err := st.UserByName(ctx, name)
			if err != nil {
				return fmt.Errorf("no user named %q: %w", name, err)
			}
			generated := password == ""
			if generated {
				if password, err = keys.Random("", 20); err != nil {
					return err
				}
			}
			if err := account.SetPassword(ctx, st, u.ID, password, ""); err != nil {
				return err
			}
			if generated {
				fmt.Fprintln(cmd.OutOrStdout(), password)
			}
			return nil
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("password", "", "new password (8 characters or more)")
	return c
}

func (e Env) userSetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set --username <name> [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Sets a user's rate limits, over all of their keys (0 clears one)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
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
