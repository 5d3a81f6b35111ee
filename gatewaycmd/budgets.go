package gatewaycmd

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// windowFlags adds a --<window> USD flag per spending window.
func windowFlags(c *cobra.Command) {
	for _, w := range []string{"5h", "daily", "weekly", "monthly", "lifetime"} {
		c.Flags().String(w, "", "the "+w+" window's limit in USD (0 removes it)")
	}
}

// budgetChange is the windows the flags the command was given set.
func budgetChange(cmd *cobra.Command) account.BudgetChange {
	c := account.BudgetChange{}
	for _, w := range []string{"5h", "daily", "weekly", "monthly", "lifetime"} {
		if cmd.Flags().Changed(w) {
			c[w], _ = cmd.Flags().GetString(w)
		}
	}
	return c
}

// budgetOut is what a budget command prints: the subject's windows in
// units as the store holds them.
func budgetOut(ctx context.Context, cmd *cobra.Command, st store.Store, subject string) error {
	b, err := st.Budgets(ctx, []string{subject})
	if err != nil {
		return err
	}
	return printJSON(cmd, map[string]any{"subject": subject, "windows": b[subject]})
}

func (e Env) userBudgetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "budget --username <name> [--5h USD] [--daily USD] [--weekly USD] [--monthly USD] [--lifetime USD]",
		Short: "Sets a user's own spending windows, over all of their keys (0 removes one)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			a, err := account.SetUserBudget(ctx, st, account.Operator, u.ID, budgetChange(cmd))
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, a.Action, a.Target, a.Before, a.After)
			return budgetOut(ctx, cmd, st, "user:"+strconv.FormatInt(u.ID, 10))
		}),
	}
	c.Flags().String("username", "", "user name")
	windowFlags(c)
	required(c, "username")
	return c
}

func (e Env) tokenBudgetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "budget --id <token id> [--5h USD] [--daily USD] [--weekly USD] [--monthly USD] [--lifetime USD]",
		Short: "Sets a key's own spending windows (0 removes one)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			t, err := tokenWithID(ctx, cmd, st)
			if err != nil {
				return err
			}
			a, err := account.SetKeyBudget(ctx, st, account.Operator, t.ID, budgetChange(cmd))
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, a.Action, a.Target, a.Before, a.After)
			return budgetOut(ctx, cmd, st, "key:"+strconv.FormatInt(t.ID, 10))
		}),
	}
	idFlag(c)
	windowFlags(c)
	return c
}

func (e Env) userPlanCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "plan --username <name> [--plan <plan>] [--until RFC3339 | --days N] [--group <budget group>]",
		Short: "Assigns a user a plan (until a time, or for some days) and a budget group; an empty name removes one",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			var ch account.PlanChange
			if cmd.Flags().Changed("plan") {
				p, _ := cmd.Flags().GetString("plan")
				ch.Plan = &p
			}
			if cmd.Flags().Changed("group") {
				g, _ := cmd.Flags().GetString("group")
				ch.Group = &g
			}
			ch.Until, _ = cmd.Flags().GetString("until")
			if days, _ := cmd.Flags().GetInt("days"); days > 0 {
				ch.Until = time.Now().AddDate(0, 0, days).UTC().Format(time.RFC3339)
			}
			if ch.Plan == nil && ch.Group == nil {
				return flagError(cmd, errors.New("give --plan, --group or both"))
			}
			known, err := e.known(cmd)
			if err != nil {
				return err
			}
			if known == nil && (ch.Plan != nil && *ch.Plan != "" || ch.Group != nil && *ch.Group != "") {
				return errors.New("--plan and --group need the gateway's configuration to check the names exist: run in the directory of its Caddyfile or pass --config")
			}
			b, a, err := account.SetUserPlan(ctx, st, account.Operator, u.ID, ch, known)
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, a.Action, a.Target, a.Before, a.After)
			return printJSON(cmd, b)
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("plan", "", "a plan of the gateway's Caddyfile (empty: none)")
	c.Flags().String("until", "", "when the plan ends, RFC 3339 (default: never)")
	c.Flags().Int("days", 0, "the plan ends this many days from now")
	c.Flags().String("group", "", "a budget_group of the gateway's Caddyfile (empty: none)")
	c.MarkFlagsMutuallyExclusive("until", "days")
	required(c, "username")
	return c
}
