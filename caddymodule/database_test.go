package caddymodule

import (
	"path/filepath"
	"testing"
	"time"

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

// A database a reload dropped closes only once no request is in it, and
// a request arriving after that is refused (to retry on the new
// configuration) rather than served on a closed store, its row in neither
// database (CI: TestReloadChangesDatabaseUnderLoad under the race binary).
func TestDroppedDatabaseQuiesces(t *testing.T) {
	db := &database{}
	if !db.tryEnter() {
		t.Fatal("a request was refused by an open database")
	}
	quiet := make(chan struct{})
	go func() { defer close(quiet); db.quiesce(20 * time.Millisecond) }()
	// while one is in, others still come in
	for range 3 {
		if !db.tryEnter() {
			t.Fatal("a request was refused while another was being served")
		}
		db.leave()
	}
	select {
	case <-quiet:
		t.Fatal("the database quiesced with a request in it")
	default:
	}
	db.leave()
	<-quiet
	if db.tryEnter() {
		t.Fatal("a request came into a database that is closing")
	}
	if n := db.active.Load(); n != 0 {
		t.Fatalf("%d requests counted in a closed database", n)
	}
}
