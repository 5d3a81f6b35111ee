package postgres

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"no number":       {"init.sql": {}},
		"zero":            {"0000_init.sql": {}},
		"shared version":  {"0001_a.sql": {}, "1_b.sql": {}},
		"not a number":    {"v1_init.sql": {}},
		"missing divider": {"0001.sql": {}},
	}
	for name, fsys := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := loadMigrations(fsys); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// Version N is the same step in both stores: the file names match
// store/sqlite's one for one.
func TestMigrationsMatchSQLite(t *testing.T) {
	ms, err := loadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, m := range ms {
		ours = append(ours, m.name)
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
