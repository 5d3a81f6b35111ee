package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Store opens the gateway's database through the store interface, for
// inspection; the gateway keeps serving meanwhile.
func (g *Gateway) Store() store.Store {
	g.t.Helper()
	if g.DSN != "" {
		return openStore(g.t, "postgres", expandEnv(g.DSN))
	}
	return OpenStore(g.t, g.DBPath)
}

// OpenStore opens a SQLite database through the store interface until the
// test ends; on a PostgreSQL run, the database standing in for it.
func OpenStore(t testing.TB, path string) store.Store {
	t.Helper()
	if OnPostgres() {
		return openStore(t, "postgres", postgresFor(t, path))
	}
	return openStore(t, "sqlite", path)
}

func openStore(t testing.TB, driver, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// User is a user as stored.
type User = store.User

// UsageRow is what tests read back of a usage row.
type UsageRow = store.UsageLog

// WaitUsage waits until the user has at least n usage rows (the writer
// batches them) and returns them, oldest first.
func (g *Gateway) WaitUsage(user string, n int) []UsageRow {
	g.t.Helper()
	st := g.Store()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := g.usage(st, user)
		if err == nil && len(rows) >= n {
			return rows
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("waited for %d usage rows of %s, have %d (err %v)", n, user, len(rows), err)
		}
		// finer than the writer's default linger (50ms), which a coarser
		// step would add to once more at every wait
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *Gateway) usage(st store.Store, user string) ([]UsageRow, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, err := st.UserByName(ctx, user)
	if err != nil {
		return nil, err
	}
	logs, err := st.ListUsage(ctx, store.UsageFilter{UserID: u.ID, Limit: 100000})
	if err != nil {
		return nil, err
	}
	out := make([]UsageRow, len(logs))
	for i, l := range logs {
		out[len(logs)-1-i] = *l // newest first -> oldest first
	}
	return out, nil
}

// User returns a user as stored.
func (g *Gateway) User(name string) *store.User {
	g.t.Helper()
	u, err := g.Store().UserByName(context.Background(), name)
	if err != nil {
		g.t.Fatal(err)
	}
	return u
}

// Quota returns a user's quota and used quota as stored.
func (g *Gateway) Quota(user string) (quota, used int64) {
	u := g.User(user)
	return u.Quota, u.UsedQuota
}
