package gatewaycmd

import (
	"context"
	"encoding/json"
	"io"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// What the commands read of the gateway's configuration, once the Caddy
// layer has found and adapted it (Env's functions): its database, opened
// as the gateway opens it, and the names of its plans and budget groups.

// OpenDatabase opens the database of driver and dsn for a command,
// making its root user first on an empty one, as the gateway does
// (account.BootstrapRoot, which prints the password to out).
func OpenDatabase(driver, dsn string, log *zap.Logger, out io.Writer) (store.Store, error) {
	st, err := store.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	if err := account.BootstrapRoot(context.Background(), st, log, out); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// ConfigBudgets are the names of the configuration's plans and budget
// groups (its gateway app's "budgets").
type ConfigBudgets struct {
	Plans  map[string]json.RawMessage `json:"plans"`
	Groups map[string]json.RawMessage `json:"groups"`
}

// Known says whether the configuration names a plan or a budget group,
// or the database of driver and dsn keeps a plan made at runtime of that
// name: Env.Known's check.
func (b *ConfigBudgets) Known(driver, dsn string) func(kind, name string) bool {
	return func(kind, name string) bool {
		if kind == "plan" {
			return b.Plans[name] != nil || RuntimePlanKnown(driver, dsn, name)
		}
		return b.Groups[name] != nil
	}
}
