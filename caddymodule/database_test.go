package caddymodule

import (
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// A database that is not a file here journals under Caddy's data
// directory, one journal per database, named without its password.
func TestDefaultJournal(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	if got := defaultJournal(DatabaseConfig{Driver: "sqlite", DSN: "file:/srv/gw.db?_busy_timeout=100"}); got != "/srv/gw.db.usage-journal" {
		t.Errorf("SQLite file: %q", got)
	}
	a := defaultJournal(DatabaseConfig{Driver: "postgres", DSN: "postgres://gw:one@db/a"})
	if dir := filepath.Join(caddy.AppDataDir(), "gateway"); filepath.Dir(a) != dir {
		t.Errorf("journal %q is not in %q", a, dir)
	}
	if b := defaultJournal(DatabaseConfig{Driver: "postgres", DSN: "postgres://gw:two@db/a"}); b != a {
		t.Errorf("a new password moved the journal: %q, then %q", a, b)
	}
	if c := defaultJournal(DatabaseConfig{Driver: "postgres", DSN: "postgres://gw@db/b"}); c == a {
		t.Errorf("two databases share the journal %q", c)
	}
	if m := defaultJournal(DatabaseConfig{Driver: "sqlite", DSN: ":memory:"}); filepath.Dir(m) != filepath.Dir(a) {
		t.Errorf("SQLite in memory: %q", m)
	}
}
