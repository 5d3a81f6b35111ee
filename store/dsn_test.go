package store

import (
	"os"
	"path/filepath"
	"strings"
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
	a := DatabaseKey("sqlite", "gw.db")
	for _, dsn := range []string{"./gw.db", filepath.Join(dir, "gw.db"), "sub/../gw.db"} {
		if b := DatabaseKey("sqlite", dsn); b != a {
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
		if b := DatabaseKey("sqlite", "link/gw.db"); b != a {
			t.Errorf("symlink (file exists: %v): key %s, want %s", create, b, a)
		}
	}
}

// A PostgreSQL password never reaches a log line or an error, wherever
// the data source name carries it.
func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://gw:s3cret-pw@db:5432/gateway?sslmode=disable", "postgres://gw:xxxxx@db:5432/gateway?sslmode=disable"},
		{"postgresql://gw@db/gateway?password=s3cret-pw&pool_max_conns=8", "postgresql://gw@db/gateway?password=xxxxx&pool_max_conns=8"},
		{"postgres://gw@db/gateway", "postgres://gw@db/gateway"},
		{"host=db user=gw password=s3cret-pw dbname=gateway", "host=db user=gw password=xxxxx dbname=gateway"},
		{"host=db PASSWORD = 's3cret \\' pw' dbname=gateway", "host=db PASSWORD = xxxxx dbname=gateway"},
		{"postgres://gw:s3cret-pw@db:bad-port/gateway", "postgres://(a URL that does not parse)"},
	} {
		got := RedactDSN("postgres", tc.dsn)
		if got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
	if got := RedactDSN("sqlite", "./data/gw.db"); got != "./data/gw.db" {
		t.Errorf("a SQLite path is shown as it is, got %q", got)
	}
}

// Only a password written into the configuration itself is warned about:
// one in a placeholder stays out of the admin API.
func TestDSNHoldsPassword(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://gw:s3cret@db/gateway":              true,
		"postgres://gw@db/gateway?password=s3cret":     true,
		"host=db password=s3cret":                      true,
		"postgres://gw:{env.PGPW}@db/gateway":          false,
		"host=db password={env.PGPW}":                  false,
		"postgres://gw@db/gateway?sslmode=require":     false,
		"{env.GATEWAY_DB}":                             false,
		"host=db user=gw dbname=gateway sslmode=allow": false,
	} {
		if got := DSNHoldsPassword("postgres", dsn); got != want {
			t.Errorf("DSNHoldsPassword(%q) = %v, want %v", dsn, got, want)
		}
	}
}
