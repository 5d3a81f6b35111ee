package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// audit records a change the command made, as the actor "cli". The change
// is made by then: a failed write is said on stderr, and the command
// still succeeds.
func audit(ctx context.Context, cmd *cobra.Command, st store.Store, action, target string, before, after account.Fields) {
	if err := account.Audit(ctx, st, account.Operator, action, target, before, after); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the change is made but not in the audit log: %v\n", err)
	}
}

// auditView is an audit entry as the CLI prints it.
type auditView struct {
	ID        int64           `json:"id"`
	CreatedAt timestamp       `json:"created_at"`
	Actor     string          `json:"actor"`
	ActorID   int64           `json:"actor_id"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	Before    json.RawMessage `json:"before,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
}

func (e Env) auditListCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "list [--actor <name|cli>] [--action <action|prefix.>] [--target <user:7>] [--since <duration>] [--before-id <id>] [--limit N]",
		Short: "Lists the audit log as a JSON array, newest first, a page at a time",
		Long: `Lists administrators' actions (and this command line's, as the actor "cli"),
newest first: who, what, to which user, key, code or channel, and the fields
before and after (never a password or a key). --action takes an action such
as user.update, or a prefix ending in a dot (user.) for a whole kind. A full
page ends with a line on stderr giving the --before-id that continues it.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			var f store.AuditFilter
			f.Actor, _ = cmd.Flags().GetString("actor")
			f.Action, _ = cmd.Flags().GetString("action")
			f.Target, _ = cmd.Flags().GetString("target")
			f.BeforeID, _ = cmd.Flags().GetInt64("before-id")
			f.Limit, _ = cmd.Flags().GetInt("limit")
			if f.BeforeID < 0 {
				return errors.New("--before-id must be an entry's id (0 starts at the newest)")
			}
			if f.Limit < 1 || f.Limit > maxListLimit {
				return fmt.Errorf("--limit must be from 1 to %d, not %d", maxListLimit, f.Limit)
			}
			if since, _ := cmd.Flags().GetString("since"); since != "" {
				d, err := e.ParseDuration(since)
				if err != nil || d <= 0 {
					return fmt.Errorf("--since must be a positive duration such as 24h or 7d, not %q", since)
				}
				f.Since = time.Now().Add(-d)
			}
			entries, err := st.ListAudit(ctx, f)
			if err != nil {
				return err
			}
			out := make([]auditView, 0, len(entries))
			for _, a := range entries {
				out = append(out, auditView{ID: a.ID, CreatedAt: timestamp(a.CreatedAt), Actor: a.Actor, ActorID: a.ActorID,
					Action: a.Action, Target: a.Target, Before: a.Before, After: a.After})
			}
			if err := printJSON(cmd, out); err != nil {
				return err
			}
			if len(entries) == f.Limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "more entries may follow: %s --before-id %d\n", cmd.CommandPath(), entries[len(entries)-1].ID)
			}
			return nil
		}),
	}
	c.Flags().String("actor", "", "only this actor's actions: a user name, or cli")
	c.Flags().String("action", "", "only this action (user.update), or every action a prefix ending in . begins (user.)")
	c.Flags().String("target", "", "only actions on this, such as user:7, key:3 or batch:spring-promo")
	c.Flags().String("since", "", "only the last period, such as 24h or 7d")
	c.Flags().Int64("before-id", 0, "list entries with an id below this one (the last of the page before)")
	c.Flags().Int("limit", 50, fmt.Sprintf("entries at most (1 to %d)", maxListLimit))
	return c
}
