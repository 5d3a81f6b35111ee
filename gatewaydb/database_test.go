package gatewaydb

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A database that is not a file here journals under the data directory,
// one journal per database, named without its password.
func TestDefaultJournal(t *testing.T) {
	data := t.TempDir()
	if got := DefaultJournal("sqlite", "file:/srv/gw.db?_busy_timeout=100", data); got != "/srv/gw.db.usage-journal" {
		t.Errorf("SQLite file: %q", got)
	}
	a := DefaultJournal("postgres", "postgres://gw:one@db/a", data)
	if dir := filepath.Join(data, "gateway"); filepath.Dir(a) != dir {
		t.Errorf("journal %q is not in %q", a, dir)
	}
	if b := DefaultJournal("postgres", "postgres://gw:two@db/a", data); b != a {
		t.Errorf("a new password moved the journal: %q, then %q", a, b)
	}
	if c := DefaultJournal("postgres", "postgres://gw@db/b", data); c == a {
		t.Errorf("two databases share the journal %q", c)
	}
	if m := DefaultJournal("sqlite", ":memory:", data); filepath.Dir(m) != filepath.Dir(a) {
		t.Errorf("SQLite in memory: %q", m)
	}
}

// Files' bytes are kept beside a SQLite file, else under the data
// directory.
func TestDefaultFiles(t *testing.T) {
	data := t.TempDir()
	if got := DefaultFiles("sqlite", "file:/srv/gw.db?_busy_timeout=100", data); got != "/srv/files" {
		t.Errorf("SQLite file: %q", got)
	}
	want := filepath.Join(data, "gateway", "files")
	for _, dsn := range []string{"sqlite :memory:", "postgres postgres://gw@db/a"} {
		driver, source, _ := strings.Cut(dsn, " ")
		if got := DefaultFiles(driver, source, data); got != want {
			t.Errorf("%s: %q, want %q", dsn, got, want)
		}
	}
}

// A database a reload dropped closes only once no request is in it, and
// a request arriving after that is refused (to retry on the new
// configuration) rather than served on a closed store, its row in neither
// database (CI: TestReloadChangesDatabaseUnderLoad under the race binary).
func TestDroppedDatabaseQuiesces(t *testing.T) {
	db := &Database{}
	if !db.TryEnter() {
		t.Fatal("a request was refused by an open database")
	}
	quiet := make(chan struct{})
	go func() { defer close(quiet); db.quiesce(20 * time.Millisecond) }()
	// while one is in, others still come in
	for range 3 {
		if !db.TryEnter() {
			t.Fatal("a request was refused while another was being served")
		}
		db.Leave()
	}
	select {
	case <-quiet:
		t.Fatal("the database quiesced with a request in it")
	default:
	}
	db.Leave()
	<-quiet
	if db.TryEnter() {
		t.Fatal("a request came into a database that is closing")
	}
	if n := db.active.Load(); n != 0 {
		t.Fatalf("%d requests counted in a closed database", n)
	}
}
