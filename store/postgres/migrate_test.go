package postgres

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/store"
)

// Version N is the same step in both stores: the file names match
// store/sqlite's one for one.
func TestMigrationsMatchSQLite(t *testing.T) {
	ms, err := store.LoadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, m := range ms {
		ours = append(ours, m.Name)
	}
	entries, err := os.ReadDir("../sqlite/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var theirs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			theirs = append(theirs, e.Name())
		}
	}
	if !slices.Equal(ours, theirs) {
		t.Fatalf("postgres migrations %v, sqlite's %v", ours, theirs)
	}
}

// A failing step leaves nothing behind (PostgreSQL's DDL is
// transactional) and records nothing, and the steps before it stay.
func TestMigrateFailedStepLeavesNothing(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testCluster.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fsys := fstest.MapFS{
		"0001_ok.sql":  {Data: []byte(`CREATE TABLE ok (x INTEGER); INSERT INTO ok VALUES (1);`)},
		"0002_bad.sql": {Data: []byte(`CREATE TABLE half (x INTEGER); NOT SQL;`)},
	}
	if err := migrate(ctx, pool, fsys); err == nil {
		t.Fatal("bad migration applied")
	}
	var half bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('half') IS NOT NULL`).Scan(&half); err != nil || half {
		t.Fatalf("half-applied step left its table: %v, %v", half, err)
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("recorded version = %d, %v; want 1", v, err)
	}
	// fixed, it applies the new step alone: 0001 again would insert twice
	fsys["0002_bad.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE half (x INTEGER);`)}
	if err := migrate(ctx, pool, fsys); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT COUNT(*) FROM ok`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("rows in ok = %d, %v; want 1", rows, err)
	}
}

// TestNameKeysFilledForExistingUsers: users made before name keys get
// theirs when the database is opened; names that already share a key
// keep working, and new look-alikes of any of them are refused.
func TestNameKeysFilledForExistingUsers(t *testing.T) {
	ctx := context.Background()
	dsn := testCluster.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	migrateBefore(t, ctx, pool, 30)
	for _, name := range []string{"root", "Root", "alice"} {
		if _, err := pool.Exec(ctx, `INSERT INTO users (username, password_hash, created_at) VALUES ($1, 'x', 1)`, name); err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()

	s, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var keyed int
	if err := s.(*Store).pool.QueryRow(ctx, `SELECT COUNT(*) FROM users WHERE name_key IS NOT NULL`).Scan(&keyed); err != nil || keyed != 2 {
		t.Fatalf("users with a name key: %d, %v; want 2 (root and alice; Root shares root's)", keyed, err)
	}
	for _, name := range []string{"root", "Root", "alice"} {
		if _, err := s.UserByName(ctx, name); err != nil {
			t.Fatalf("%s after the upgrade: %v", name, err)
		}
	}
	for _, name := range []string{"ROOT", "rооt", "Alice"} {
		if err := s.CreateUser(ctx, &store.User{Username: name}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a new %q beside the old names: %v, want ErrConflict", name, err)
		}
	}
}

// migrateBefore applies the store's migrations numbered below version,
// for a test that opens the store on a database an older build left.
func migrateBefore(t *testing.T, ctx context.Context, pool *pgxpool.Pool, version int64) {
	t.Helper()
	all, err := store.LoadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, m := range all {
		if m.Version < version {
			old[m.Name] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if err := migrate(ctx, pool, old); err != nil {
		t.Fatal(err)
	}
}
