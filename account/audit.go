package account

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// The audit log records who changed what: every administrator's action
// on users, keys, codes and channels, and the CLI's (as the actor "cli").
// Before and after are field maps with no secret in them: a password, its
// hash, a key or a code's text is never written, only that it changed.

// Audit actions.
const (
	AuditUserCreate   = "user.create"
	AuditUserUpdate   = "user.update" // status, role, quota, limits
	AuditUserPassword = "user.password_reset"
	AuditKeyCreate    = "key.create"
	AuditKeyUpdate    = "key.update" // limits, name, status, expiry
	AuditKeyDelete    = "key.delete"
	AuditCodeCreate   = "code.create"
	AuditCodeUpdate   = "code.update" // enabled or disabled
	AuditChannelTest  = "channel.test"
	// channels made at runtime (never their keys: a masked prefix)
	AuditChannelCreate = "channel.create"
	AuditChannelUpdate = "channel.update"
	AuditChannelDelete = "channel.delete"
	AuditPriceCreate   = "price.create"
	AuditPriceUpdate   = "price.update"
	AuditPriceDelete   = "price.delete"
	AuditPlanCreate    = "plan.create"
	AuditPlanUpdate    = "plan.update"
	AuditPlanDelete    = "plan.delete"
	AuditUserBudget    = "user.budget" // the user's own spending windows
	AuditKeyBudget     = "key.budget"  // the key's own spending windows
	AuditUserPlan      = "user.plan"   // plan, its end, budget group
)

// CLIActor is the actor the server's command line acts as.
const CLIActor = "cli"

// Fields are an audit entry's before or after: names to values as JSON
// shows them.
type Fields map[string]any

// secretFields are never written, whatever a caller passes.
var secretFields = []string{"password", "password_hash", "key", "key_hash", "code", "codes", "client_secret", "session"}

// Audit records that actor did action to target (such as "user:7"), with
// the fields before and after (nil when there is none). When both are
// given, only the fields that differ are kept. The Operator (the CLI) is
// recorded as "cli".
func Audit(ctx context.Context, st store.Store, actor *store.User, action, target string, before, after Fields) error {
	e := &store.AuditEntry{Action: action, Target: target}
	switch {
	case actor == nil || actor == Operator:
		e.Actor = CLIActor
	default:
		e.Actor, e.ActorID = actor.Username, actor.ID
	}
	before, after = redact(before), redact(after)
	if before != nil && after != nil {
		before, after = changed(before, after)
	}
	var err error
	if e.Before, err = fieldsJSON(before); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	if e.After, err = fieldsJSON(after); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	if err := st.AddAudit(ctx, e); err != nil {
		return fmt.Errorf("audit %s of %s: %w", action, target, err)
	}
	return nil
}

func redact(f Fields) Fields {
	if f == nil {
		return nil
	}
	out := maps.Clone(f)
	for _, k := range secretFields {
		if _, ok := out[k]; ok {
			out[k] = "(changed)"
		}
	}
	return out
}

// changed keeps the fields whose values differ (or exist on one side only).
func changed(before, after Fields) (Fields, Fields) {
	b, a := Fields{}, Fields{}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if v, ok := before[k]; !ok || !reflect.DeepEqual(v, after[k]) {
			if ok {
				b[k] = v
			}
			a[k] = after[k]
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			b[k] = v
		}
	}
	return b, a
}

func fieldsJSON(f Fields) (json.RawMessage, error) {
	if len(f) == 0 {
		return nil, nil
	}
	return json.Marshal(f)
}

// UserTarget, KeyTarget and CodeTarget name what an entry is about.
func UserTarget(id int64) string { return "user:" + strconv.FormatInt(id, 10) }
func KeyTarget(id int64) string  { return "key:" + strconv.FormatInt(id, 10) }
func CodeTarget(id int64) string { return "code:" + strconv.FormatInt(id, 10) }

// AuditUser is what the audit log keeps of a user.
func AuditUser(u *store.User) Fields {
	return Fields{"username": u.Username, "role": u.Role, "status": u.Status, "quota": u.Quota, "limits": limitsFields(u.Limits)}
}

// AuditKey is what the audit log keeps of a key: never the key.
func AuditKey(t *store.Token) Fields {
	f := Fields{"name": t.Name, "user_id": t.UserID, "status": t.Status, "quota_limit": t.QuotaLimit,
		"models": t.Models, "limits": limitsFields(t.Limits), "key_prefix": t.KeyPrefix}
	if t.Models == nil {
		f["models"] = []string{}
	}
	if !t.ExpiresAt.IsZero() {
		f["expires_at"] = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if t.Management {
		f["management"] = true
	}
	return f
}

// AuditCode is what the audit log keeps of a code: never its text.
func AuditCode(c *store.RedemptionCode) Fields {
	return Fields{"name": c.Name, "quota": c.Quota, "status": c.Status}
}

func limitsFields(l store.Limits) Fields {
	return Fields{"rpm": l.RPM, "tpm": l.TPM, "max_parallel": l.MaxParallel}
}
