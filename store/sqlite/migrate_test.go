package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/caddy-model-gateway/gateway/store"
)

func TestMigrateAppliesOnlyNewSteps(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "m.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Plain CREATE TABLE fails if run twice, so a repeated step shows.
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);`)},
		"0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER);`)},
	}
	for i := range 2 {
		if err := migrate(ctx, db, fsys); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	fsys["0010_c.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE c (x INTEGER);`)}
	if err := migrate(ctx, db, fsys); err != nil {
		t.Fatalf("with a new step: %v", err)
	}
	var versions, rowsInA int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM a`).Scan(&rowsInA); err != nil {
		t.Fatal(err)
	}
	if versions != 3 || rowsInA != 1 {
		t.Fatalf("versions = %d, rows in a = %d; want 3 and 1", versions, rowsInA)
	}
}

func TestMigrateFailedStepLeavesNothing(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys := fstest.MapFS{
		"0001_ok.sql":  {Data: []byte(`CREATE TABLE ok (x INTEGER);`)},
		"0002_bad.sql": {Data: []byte(`CREATE TABLE half (x INTEGER); NOT SQL;`)},
	}
	if err := migrate(ctx, db, fsys); err == nil {
		t.Fatal("bad migration applied")
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("half-applied step left its table: n=%d err=%v", n, err)
	}
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("recorded version = %d, %v; want 1", n, err)
	}
}

func TestEmbeddedMigrationsInOrder(t *testing.T) {
	ms, err := store.LoadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("embedded migrations start wrong: %+v", ms)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Version <= ms[i-1].Version {
			t.Fatalf("out of order: %s after %s", ms[i].Name, ms[i-1].Name)
		}
	}
}
