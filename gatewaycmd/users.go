package gatewaycmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// userNamed is the user --username names.
func userNamed(ctx context.Context, cmd *cobra.Command, st store.Store) (*store.User, error) {
	name, _ := cmd.Flags().GetString("username")
	u, err := st.UserByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no user named %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading user %q: %w", name, err)
	}
	return u, nil
}

// changeUser makes c to the user --username names, as the operator, and
// prints the user as they then are.
func changeUser(ctx context.Context, cmd *cobra.Command, st store.Store, c account.UserChange) error {
	u, err := userNamed(ctx, cmd, st)
	if err != nil {
		return err
	}
	before := account.AuditUser(u)
	if u, err = account.UpdateUser(ctx, st, account.Operator, u.ID, c); err != nil {
		return err
	}
	audit(ctx, cmd, st, account.AuditUserUpdate, account.UserTarget(u.ID), before, account.AuditUser(u))
	return printJSON(cmd, viewUser(u))
}

func (e Env) userAddCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "add --username <name> [--password-stdin] [--role user|admin|root] [--quota <units> | --usd <USD>] [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Creates a user (with a random password, printed, unless one is read from stdin)",
		Long: `Creates a user. The password is read from the first line of stdin with
--password-stdin; without it a random one is made and printed once, as
"password" in the JSON. --password <password> still works, but puts the
password where every user of the machine can read it (ps, the shell's
history).`,
		RunE: e.withPassword(func(ctx context.Context, cmd *cobra.Command, st store.Store, password string, generated bool) error {
			var n account.NewUser
			n.Username, _ = cmd.Flags().GetString("username")
			n.Role, _ = cmd.Flags().GetString("role")
			n.Password = password
			var err error
			if n.Quota, err = money(cmd, "quota"); err != nil {
				return err
			}
			if n.Limits, err = newLimits(cmd); err != nil {
				return err
			}
			u, err := account.CreateUser(ctx, st, account.Operator, n)
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditUserCreate, account.UserTarget(u.ID), nil, account.AuditUser(u))
			if generated {
				return printJSON(cmd, struct {
					userView
					Password string `json:"password"`
				}{viewUser(u), password})
			}
			return printJSON(cmd, viewUser(u))
		}),
	}
	c.Flags().String("username", "", "user name")
	passwordFlags(c)
	c.Flags().String("role", store.RoleUser, "user, admin or root")
	c.Flags().Int64("quota", 0, "starting quota in units (1,000,000 = 1 USD)")
	usdFlag(c, "quota", "starting quota")
	limitFlags(c)
	required(c, "username")
	return c
}

// passwordFlags are the ways to give a command a password: on stdin, or
// (seen by anyone who lists processes) as an argument.
func passwordFlags(c *cobra.Command) {
	c.Flags().Bool("password-stdin", false, "read the password from the first line of stdin")
	c.Flags().String("password", "", "the password (8 characters or more); others on the machine can read it: prefer --password-stdin")
}

// withPassword is withStore for a command that takes a password: the
// password flags are read, and stdin with them, before the database is
// opened, so a mistake in them opens nothing.
func (e Env) withPassword(run func(ctx context.Context, cmd *cobra.Command, st store.Store, password string, generated bool) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := checkRequired(cmd); err != nil {
			return err
		}
		password, generated, err := passwordFrom(cmd)
		if err != nil {
			return err
		}
		return e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			return run(ctx, cmd, st, password, generated)
		})(cmd, args)
	}
}

// maxPasswordLine bounds what --password-stdin reads: a password is far
// shorter, and a file piped by mistake is not read whole.
const maxPasswordLine = 4096

// passwordFrom is the password the flags give, or a random one
// (generated) when they give none.
func passwordFrom(cmd *cobra.Command) (password string, generated bool, err error) {
	fromStdin, _ := cmd.Flags().GetBool("password-stdin")
	password, _ = cmd.Flags().GetString("password")
	switch {
	case fromStdin && cmd.Flags().Changed("password"):
		return "", false, errors.New("give --password-stdin or --password, not both")
	case fromStdin:
		line, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), maxPasswordLine)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", false, fmt.Errorf("reading the password from stdin: %w", err)
		}
		password = strings.TrimRight(line, "\r\n")
		if password == "" {
			return "", false, errors.New("--password-stdin read no password: write it on stdin's first line")
		}
		return password, false, nil
	case cmd.Flags().Changed("password"):
		if password == "" {
			return "", false, errors.New("--password is empty: leave it out for a random password")
		}
		return password, false, nil
	}
	password, err = keys.Random("", 20)
	return password, true, err
}

// maxListLimit bounds one page of a listing.
const maxListLimit = 1000

func (e Env) userListCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "list [--search <part of a name>] [--after-id <user id>] [--limit N]",
		Short: "Lists users as a JSON array, oldest first, a page at a time",
		Long: `Lists users as a JSON array in id order. A full page ends with a line on
stderr giving the --after-id that continues it.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			f := store.UserFilter{}
			f.AfterID, _ = cmd.Flags().GetInt64("after-id")
			f.Limit, _ = cmd.Flags().GetInt("limit")
			f.Search, _ = cmd.Flags().GetString("search")
			if f.AfterID < 0 {
				return errors.New("--after-id must be a user id (0 starts at the first)")
			}
			if f.Limit < 1 || f.Limit > maxListLimit {
				return fmt.Errorf("--limit must be from 1 to %d, not %d", maxListLimit, f.Limit)
			}
			users, err := st.ListUsers(ctx, f)
			if err != nil {
				return err
			}
			out := make([]userView, 0, len(users))
			for _, u := range users {
				out = append(out, viewUser(u))
			}
			if err := printJSON(cmd, out); err != nil {
				return err
			}
			if len(users) == f.Limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "more users may follow: %s --after-id %d\n", cmd.CommandPath(), users[len(users)-1].ID)
			}
			return nil
		}),
	}
	c.Flags().Int64("after-id", 0, "list users with an id above this one (the last of the page before)")
	c.Flags().String("search", "", "only users whose name holds this, in any case")
	c.Flags().Int("limit", 50, fmt.Sprintf("users at most (1 to %d)", maxListLimit))
	return c
}

func (e Env) userShowCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "show --username <name>",
		Short: "Prints a user's quota, used quota and invitation quota as JSON",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			return printJSON(cmd, viewUser(u))
		}),
	}
	c.Flags().String("username", "", "user name")
	required(c, "username")
	return c
}

func (e Env) userPasswdCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "passwd --username <name> [--password-stdin]",
		Short: "Sets a user's password (read from stdin, or a random one, printed) and ends their sessions",
		RunE: e.withPassword(func(ctx context.Context, cmd *cobra.Command, st store.Store, password string, generated bool) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			if err := account.SetPassword(ctx, st, u.ID, password, ""); err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditUserPassword, account.UserTarget(u.ID), nil,
				account.Fields{"password": "(changed)", "sessions_ended": true})
			if generated {
				fmt.Fprintln(cmd.OutOrStdout(), password)
			}
			return nil
		}),
	}
	c.Flags().String("username", "", "user name")
	passwordFlags(c)
	required(c, "username")
	return c
}

func (e Env) userSetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set --username <name> [--rpm N] [--tpm N] [--max-parallel N]",
		Short: "Sets a user's rate limits, over all of their keys (0 clears one)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			change, err := limitsChange(cmd)
			if err != nil {
				return err
			}
			return changeUser(ctx, cmd, st, account.UserChange{Limits: &change})
		}),
	}
	c.Flags().String("username", "", "user name")
	limitFlags(c)
	required(c, "username")
	return c
}

func (e Env) userStatusCommand(verb, status string) *cobra.Command {
	c := &cobra.Command{
		Use:   verb + " --username <name>",
		Short: "Enables a user again: their keys work again within the token cache TTL",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			return changeUser(ctx, cmd, st, account.UserChange{Status: &status})
		}),
	}
	if status == store.UserDisabled {
		c.Short = "Disables a user: their keys stop working within the token cache TTL and their sessions end"
	}
	c.Flags().String("username", "", "user name")
	required(c, "username")
	return c
}

func (e Env) userRoleCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "role --username <name> --role user|admin|root",
		Short: "Changes a user's role (a new role ends their sessions)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			role, _ := cmd.Flags().GetString("role")
			return changeUser(ctx, cmd, st, account.UserChange{Role: &role})
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("role", "", "user, admin or root")
	required(c, "username", "role")
	return c
}

// quotaFlags are user quota's ways of saying an amount, one at a time.
var quotaFlags = []string{"add", "set", "add-usd", "set-usd"}

func (e Env) userQuotaCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "quota --username <name> (--add <units> | --set <units> | --add-usd <USD> | --set-usd <USD>)",
		Short: "Adds to or sets a user's balance, in units (1,000,000 = 1 USD) or in USD",
		Long: `Adds to a user's balance (a negative amount takes from it, never below zero)
or sets it. A credit is a payment: it pays the reward a user's inviter is owed,
as redeeming a code does. The running gateway sees the new balance within its
token cache TTL. --set writes the difference from the balance it reads, so a
request settled at that moment is not undone.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			var given []string
			for _, f := range quotaFlags {
				if cmd.Flags().Changed(f) {
					given = append(given, "--"+f)
				}
			}
			if len(given) != 1 {
				return fmt.Errorf("give one of --add, --set, --add-usd or --set-usd, not %d: %s", len(given), usageLine(cmd))
			}
			amount, err := quotaAmount(cmd, given[0][2:])
			if err != nil {
				return err
			}
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			delta := amount
			if strings.HasPrefix(given[0], "--set") {
				if amount < 0 {
					return fmt.Errorf("%s must not be negative", given[0])
				}
				delta = amount - u.Quota
			}
			if u.Quota+delta < 0 {
				return fmt.Errorf("%s would take the balance of %q, %d units, below zero", given[0], u.Username, u.Quota)
			}
			if delta == 0 {
				return printJSON(cmd, viewUser(u))
			}
			return changeUser(ctx, cmd, st, account.UserChange{QuotaDelta: &delta})
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().Int64("add", 0, "units to add (negative: to take)")
	c.Flags().Int64("set", 0, "the new balance in units")
	c.Flags().String("add-usd", "", "USD to add, e.g. 5 or 0.25 (negative: to take)")
	c.Flags().String("set-usd", "", "the new balance in USD")
	required(c, "username")
	return c
}

// quotaAmount is the flag's amount in units.
func quotaAmount(cmd *cobra.Command, flag string) (int64, error) {
	if !strings.HasSuffix(flag, "-usd") {
		n, err := cmd.Flags().GetInt64(flag)
		if err == nil {
			warnUnderCent(cmd, flag, n)
		}
		return n, err
	}
	s, _ := cmd.Flags().GetString(flag)
	digits, negative := strings.CutPrefix(strings.TrimSpace(s), "-")
	units, err := billing.ParseUSD(digits)
	if err != nil || digits == "" {
		return 0, fmt.Errorf("--%s must be an amount of USD with at most six decimals, such as 5 or 0.25, not %q", flag, s)
	}
	if negative {
		units = -units
	}
	return units, nil
}
