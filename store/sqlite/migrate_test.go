package sqlite

import (
	"context"
	"database/sql"
	"errors"
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

// TestNameKeysFilledForExistingUsers: users made before name keys get
// theirs when the database is opened; names that already share a key
// keep working, and new look-alikes of any of them are refused.
func TestNameKeysFilledForExistingUsers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.LoadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, m := range all {
		if m.Version < 30 {
			old[m.Name] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if err := migrate(ctx, db, old); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"root", "Root", "alice"} {
		if _, err := db.Exec(`INSERT INTO users (username, password_hash, created_at) VALUES (?, 'x', 1)`, name); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw := s.(*Store).r
	var keyed int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM users WHERE name_key IS NOT NULL`).Scan(&keyed); err != nil || keyed != 2 {
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
