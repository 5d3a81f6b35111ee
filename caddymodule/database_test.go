package caddymodule

import (
	"os"
	"path/filepath"
	"testing"
)

// Two spellings of one SQLite file are one database, so they share one
// ledger: two ledgers never admit against one balance.
func TestDatabaseKeyIsCanonical(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	a := databaseKey(DatabaseConfig{Driver: "sqlite", DSN: "gw.db"})
	for _, dsn := range []string{"./gw.db", filepath.Join(dir, "gw.db"), "sub/../gw.db"} {
		if b := databaseKey(DatabaseConfig{Driver: "sqlite", DSN: dsn}); b != a {
			t.Errorf("%s: key %s, want %s", dsn, b, a)
		}
	}
	// through a symlinked directory, before and after the file exists
	for _, create := range []bool{false, true} {
		if create {
			if err := os.WriteFile(filepath.Join(dir, "gw.db"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if b := databaseKey(DatabaseConfig{Driver: "sqlite", DSN: "link/gw.db"}); b != a {
			t.Errorf("symlink (file exists: %v): key %s, want %s", create, b, a)
		}
	}
}
