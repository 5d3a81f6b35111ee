package postgres

import (
	"context"
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
