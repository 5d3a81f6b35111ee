package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// openAt opens a store on path through the registry, as the gateway app
// does, and closes it when the test ends.
func openAt(t testing.TB, path string) store.Store {
	t.Helper()
	s, err := store.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTemp opens a fresh store in a directory that does not exist yet.
func openTemp(t testing.TB) store.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "data", "gateway.db"))
}

func mustUser(t testing.TB, s store.Store, name string, quota int64) *store.User {
	t.Helper()
	u := &store.User{Username: name, PasswordHash: "hash-" + name, Quota: quota}
	if err := s.CreateUser(context.Background(), u); err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

func mustGetUser(t testing.TB, s store.Store, id int64) *store.User {
	t.Helper()
	u, err := s.UserByID(context.Background(), id)
	if err != nil {
		t.Fatalf("user %d: %v", id, err)
	}
	return u
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(store.Drivers(), "sqlite") {
		t.Fatalf("drivers %v lack sqlite", store.Drivers())
	}
}

func TestOpenCreatesDirectoryAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a", "b", "gateway.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	u := mustUser(t, s, "alice", 42)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	before := migrationRows(t, path)
	if len(before) == 0 {
		t.Fatal("no migrations recorded")
	}

	s = openAt(t, path)
	got := mustGetUser(t, s, u.ID)
	if got.Username != "alice" || got.Quota != 42 {
		t.Fatalf("after reopen got %+v", got)
	}
	if after := migrationRows(t, path); !slices.Equal(before, after) {
		t.Fatalf("reopen changed schema_migrations: %v then %v", before, after)
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 1 {
		t.Fatalf("count users = %d, %v; want 1", n, err)
	}
}

// migrationRows reads schema_migrations and the journal mode through a
// connection of its own.
func migrationRows(t *testing.T, path string) [][2]int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode = %q, %v; want wal", mode, err)
	}
	rows, err := db.Query(`SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][2]int64
	for rows.Next() {
		var r [2]int64
		if err := rows.Scan(&r[0], &r[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestOpenMemory(t *testing.T) {
	s := openAt(t, ":memory:")
	u := mustUser(t, s, "mem", 1)
	if got := mustGetUser(t, s, u.ID); got.Username != "mem" {
		t.Fatalf("got %+v", got)
	}
}

func TestOpenEmptyDSN(t *testing.T) {
	if _, err := sqlite.Open(""); err == nil {
		t.Fatal("empty dsn opened")
	}
}

func TestOpenPathWithQuestionMark(t *testing.T) {
	// A path is a path, not a URI: '?' and '#' must not start a query.
	path := filepath.Join(t.TempDir(), "odd?name#1.db")
	s := openAt(t, path)
	mustUser(t, s, "x", 0)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %s: %v", path, err)
	}
}
