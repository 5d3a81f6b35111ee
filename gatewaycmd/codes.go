package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

func (e Env) redeemAddCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "add (--quota <units> | --usd <USD> | --plan <plan> --days <n>) [--count <n>] [--name <batch>] [--expires <duration>]",
		Short: "Creates redemption codes and prints them, one a line",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			for _, f := range []string{"rpm", "tpm", "max-parallel"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s: a redemption code adds quota only, never rate limits: set those on the user ('caddy gateway user set') or the key ('caddy gateway token set')", f)
				}
			}
			count, _ := cmd.Flags().GetInt("count")
			expires, _ := cmd.Flags().GetString("expires")
			var expiresAt time.Time
			if expires != "" {
				d, err := e.ParseDuration(expires)
				if err != nil || d <= 0 {
					return fmt.Errorf("--expires must be a positive duration such as 720h or 30d, not %q", expires)
				}
				expiresAt = time.Now().Add(d)
			}
			name, _ := cmd.Flags().GetString("name")
			var codes []*store.RedemptionCode
			var err error
			if plan, _ := cmd.Flags().GetString("plan"); plan != "" {
				known, kerr := e.known(cmd)
				if kerr != nil {
					return kerr
				}
				if known == nil {
					// unchecked, a misspelt plan's codes would redeem
					// for a plan the gateway never applies
					return fmt.Errorf("--plan needs the gateway's configuration to check that plan %q exists: run in the directory of its Caddyfile or pass --config", plan)
				}
				if !known("plan", plan) {
					return fmt.Errorf("no plan named %q is configured in the gateway's Caddyfile", plan)
				}
				days, _ := cmd.Flags().GetInt64("days")
				codes, err = account.CreatePlanCodes(ctx, st, name, count, plan, days, expiresAt)
			} else {
				quota, qerr := money(cmd, "quota")
				if qerr != nil {
					return qerr
				}
				codes, err = account.CreateCodeBatch(ctx, st, name, count, quota, expiresAt)
			}
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditCodeCreate, account.BatchTarget(codes), nil, account.AuditBatch(codes))
			for _, c := range codes {
				fmt.Fprintln(cmd.OutOrStdout(), c.Code)
			}
			return nil
		}),
	}
	// before the store is opened: a mistake on the command line opens nothing
	c.PreRunE = func(cmd *cobra.Command, _ []string) error {
		plan, quota := cmd.Flags().Changed("plan") || cmd.Flags().Changed("days"), cmd.Flags().Changed("quota") || cmd.Flags().Changed("usd")
		switch {
		case plan && quota:
			return flagError(cmd, errors.New("a code grants --quota (--usd) or a --plan for --days, not both"))
		case !plan && !quota:
			return flagError(cmd, errors.New("--quota or --usd is required (or --plan <plan> --days <n>)"))
		}
		return nil
	}
	c.Flags().Int64("quota", 0, "units each code adds (1,000,000 = 1 USD)")
	usdFlag(c, "quota", "what each code adds")
	c.Flags().String("plan", "", "a plan of the gateway's Caddyfile each code grants instead of quota")
	c.Flags().Int64("days", 0, "how long the plan lasts from the redemption (or adds on to the same plan running)")
	c.Flags().Int("count", 1, "how many codes")
	c.Flags().String("name", "", "the batch's name, to find its codes by (e.g. spring-promo)")
	c.Flags().String("expires", "", "lifetime, e.g. 720h or 30d (default: never expires)")
	// once offered and ignored: kept out of the help, and refused with
	// where limits are set instead of cobra's bare "unknown flag"
	limitFlags(c)
	for _, f := range []string{"rpm", "tpm", "max-parallel"} {
		_ = c.Flags().MarkHidden(f)
	}
	return c
}

func (e Env) redeemListCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "list [--name <batch> | --search <part>] [--before-id <code id>] [--limit N]",
		Short: "Lists redemption codes as a JSON array, newest first, a page at a time",
		Long: `Lists redemption codes as a JSON array, the newest first. A full page ends
with a line on stderr giving the --before-id that continues it.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			var f store.CodeFilter
			f.BeforeID, _ = cmd.Flags().GetInt64("before-id")
			f.Limit, _ = cmd.Flags().GetInt("limit")
			f.Name, _ = cmd.Flags().GetString("name")
			f.Search, _ = cmd.Flags().GetString("search")
			if f.BeforeID < 0 {
				return errors.New("--before-id must be a code id (0 starts at the newest)")
			}
			if f.Limit < 1 || f.Limit > maxListLimit {
				return fmt.Errorf("--limit must be from 1 to %d, not %d", maxListLimit, f.Limit)
			}
			codes, err := st.ListRedemptionCodes(ctx, f)
			if err != nil {
				return err
			}
			if err := printJSON(cmd, viewCodes(codes)); err != nil {
				return err
			}
			if len(codes) == f.Limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "more codes may follow: %s --before-id %d\n", cmd.CommandPath(), codes[len(codes)-1].ID)
			}
			return nil
		}),
	}
	c.Flags().Int64("before-id", 0, "list codes with an id below this one (the last of the page before)")
	c.Flags().String("name", "", "only the codes of this batch (its exact name)")
	c.Flags().String("search", "", "only codes whose batch name or code holds this, in any case")
	c.Flags().Int("limit", 50, fmt.Sprintf("codes at most (1 to %d)", maxListLimit))
	return c
}

// codeWithID is the code --id names. The store reads codes in pages only:
// the page of one that starts just above id holds it, if it exists.
func codeWithID(ctx context.Context, cmd *cobra.Command, st store.Store) (*store.RedemptionCode, error) {
	id, _ := cmd.Flags().GetInt64("id")
	if id > 0 && id < math.MaxInt64 {
		codes, err := st.ListRedemptionCodes(ctx, store.CodeFilter{BeforeID: id + 1, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("reading redemption code %d: %w", id, err)
		}
		if len(codes) == 1 && codes[0].ID == id {
			return codes[0], nil
		}
	}
	return nil, fmt.Errorf("no redemption code with id %d", id)
}

func (e Env) redeemStatusCommand(verb, status string) *cobra.Command {
	c := &cobra.Command{
		Use:   verb + " --id <code id>",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + "s a redemption code (a disabled one cannot be redeemed)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			code, err := codeWithID(ctx, cmd, st)
			if err != nil {
				return err
			}
			if err := st.SetRedemptionCodeStatus(ctx, code.ID, status); err != nil {
				return err
			}
			audit(ctx, cmd, st, account.AuditCodeUpdate, account.CodeTarget(code.ID), account.Fields{"status": code.Status},
				account.Fields{"status": status})
			code.Status = status
			return printJSON(cmd, viewCodes([]*store.RedemptionCode{code})[0])
		}),
	}
	c.Flags().Int64("id", 0, "code id (see 'caddy gateway redeem list')")
	required(c, "id")
	return c
}
