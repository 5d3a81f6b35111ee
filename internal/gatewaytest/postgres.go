package gatewaytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/pgtest"
	"github.com/caddy-model-gateway/gateway/store/postgres" // to inspect a gateway's PostgreSQL database
)

// DatabaseEnv names the environment variable that picks the database every
// gateway of a test run is started on: unset or "sqlite", each on the
// SQLite file its Caddyfile names; "postgres", each on a database of its
// own in one throwaway PostgreSQL cluster (internal/pgtest) that the
// harness starts for the test process, so that the whole suite runs
// unchanged against PostgreSQL (`make test-postgres`).
//
// On PostgreSQL the Caddyfile's `database sqlite <path>` line becomes
// `database postgres <dsn>`, one database per distinct path, so gateways
// a test starts on one file share one database, and OpenStore(t, path)
// opens it. The Caddyfile.example's GATEWAY_DB is mapped the same way.
const DatabaseEnv = "GATEWAY_TEST_DB"

// OnPostgres reports whether this run puts every gateway on PostgreSQL.
func OnPostgres() bool { return os.Getenv(DatabaseEnv) == "postgres" }

// SkipOnPostgres skips a test that is about SQLite itself (its files, its
// write lock, faults injected below it) when the run is on PostgreSQL;
// why says what makes the test not apply.
func SkipOnPostgres(t testing.TB, why string) {
	t.Helper()
	if OnPostgres() {
		t.Skipf("on SQLite only: %s", why)
	}
}

// shared is the test process's PostgreSQL cluster, started on first use
// and closed by Main, with the database each SQLite path was given.
var shared struct {
	once    sync.Once
	cluster *pgtest.Cluster
	err     error

	mu  sync.Mutex
	dbs map[string]string // SQLite path -> DSN

	schemaOnce sync.Once
	schemaErr  error
}

// schemaTemplate is the shared cluster's template database: the schema
// the store's migrations make, and no rows a gateway adds (no root user).
const schemaTemplate = "gateway_schema"

// Cluster is the test process's throwaway PostgreSQL cluster, started
// the first time it is asked for and stopped when Main ends. A test that
// stops its server (a fault test) starts a cluster of its own instead.
func Cluster(t testing.TB) *pgtest.Cluster {
	t.Helper()
	shared.once.Do(func() { shared.cluster, shared.err = pgtest.New() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cluster
}

// closeCluster stops the shared cluster, if one was started.
func closeCluster() error {
	if shared.cluster == nil {
		return nil
	}
	return shared.cluster.Close()
}

// PostgresDatabase is a fresh database on the shared cluster, dropped
// when the test ends: a copy of a template the store's migrations ran on
// once per test process, not an empty one. Each gateway migrating its own
// empty database took about a second of a gateway's start (CREATE
// DATABASE and some thirty migrations), several hundred times in a
// PostgreSQL run. The migrations themselves run from empty in the
// store's contract tests, and through the gateway where a test takes
// Cluster(t).Database (an empty one) on purpose.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	c := Cluster(t)
	shared.schemaOnce.Do(func() {
		shared.schemaErr = c.Template(schemaTemplate, func(dsn string) error {
			st, err := postgres.Open(dsn)
			if err != nil {
				return err
			}
			return st.Close()
		})
	})
	if shared.schemaErr != nil {
		t.Fatal(shared.schemaErr)
	}
	return c.DatabaseFrom(t, schemaTemplate)
}

// postgresFor is the database standing in for the SQLite database at
// path on a PostgreSQL run: the same for every spelling of one file, a
// new one for every in-memory database.
func postgresFor(t testing.TB, path string) string {
	t.Helper()
	path = strings.TrimPrefix(path, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == ":memory:" || path == "" {
		return PostgresDatabase(t)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if dsn, ok := shared.dbs[path]; ok {
		return dsn
	}
	dsn := PostgresDatabase(t)
	if shared.dbs == nil {
		shared.dbs = map[string]string{}
	}
	shared.dbs[path] = dsn
	t.Cleanup(func() {
		shared.mu.Lock()
		delete(shared.dbs, path)
		shared.mu.Unlock()
	})
	return dsn
}

// sqliteLine is the gateway block's database line on SQLite.
var sqliteLine = regexp.MustCompile(`(?m)^(\s*)database\s+sqlite\s+(\S+)\s*$`)

// onPostgres rewrites a Caddyfile's `database sqlite <path>` line to
// `database postgres <dsn>`; dsn == "" maps the path (a PostgreSQL run).
// It returns the Caddyfile and the DSN the harness inspects.
func onPostgres(t testing.TB, caddyfile, dsn string) (string, string) {
	t.Helper()
	m := sqliteLine.FindStringSubmatch(caddyfile)
	if m == nil {
		return caddyfile, dsn
	}
	if dsn == "" {
		dsn = postgresFor(t, m[2])
	}
	return sqliteLine.ReplaceAllLiteralString(caddyfile, m[1]+"database postgres "+dsn), dsn
}

// envPlaceholder is Caddy's runtime environment placeholder.
var envPlaceholder = regexp.MustCompile(`\{env\.([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces {env.X} placeholders as the gateway will, so the
// harness opens the database the gateway opens.
func expandEnv(s string) string {
	return envPlaceholder.ReplaceAllStringFunc(s, func(p string) string {
		return os.Getenv(envPlaceholder.FindStringSubmatch(p)[1])
	})
}

// StartOnPostgres starts a gateway on the PostgreSQL database at dsn
// (which may hold {env.X} placeholders, as a deployment keeps its
// password out of the configuration): the Caddyfile's `database sqlite`
// line, which the tests' Caddyfile builder writes, becomes
// `database postgres <dsn>`.
func StartOnPostgres(t testing.TB, dsn, caddyfile string, vars Vars) *Gateway {
	t.Helper()
	skipRepeat(t)
	return startGateway(t, caddyfile, vars, "", nil, dsn)
}

// StartInstances starts n gateways from one Caddyfile on one fresh
// PostgreSQL database, as several instances of one deployment: each with
// its own port, admin endpoint and scratch directory (its usage journal,
// in Caddy's data directory there).
func StartInstances(t testing.TB, n int, caddyfile string, vars Vars) []*Gateway {
	t.Helper()
	skipRepeat(t)
	dsn := PostgresDatabase(t)
	out := make([]*Gateway, n)
	for i := range out {
		out[i] = StartOnPostgres(t, dsn, caddyfile, vars)
	}
	return out
}

// skipRepeat skips, on a PostgreSQL run, a test that puts its gateways on
// PostgreSQL itself (several instances, a server stopped mid-run): it runs
// on PostgreSQL in the ordinary run already, and the PostgreSQL run would
// repeat it unchanged (about 100 s of `make test`).
func skipRepeat(t testing.TB) {
	t.Helper()
	if OnPostgres() {
		t.Skipf("on PostgreSQL in every run: it ran there with %s unset already", DatabaseEnv)
	}
}

// postgresEnv maps the Caddyfile.example's GATEWAY_DB, when the test set
// it to a SQLite path, to that path's database on a PostgreSQL run.
func postgresEnv(t testing.TB) []string {
	t.Helper()
	path := os.Getenv("GATEWAY_DB")
	if !OnPostgres() || path == "" || os.Getenv("GATEWAY_DB_DRIVER") != "" {
		return nil
	}
	return []string{"GATEWAY_DB_DRIVER=postgres", fmt.Sprintf("GATEWAY_DB=%s", postgresFor(t, path))}
}

// sqliteOnly are the tests about SQLite itself that a PostgreSQL run
// skips, by top-level test name, with the reason (see SQLiteOnly).
var sqliteOnly sync.Map // name -> why

// SQLiteOnly marks the test named name (a top-level test of the package
// being run) as about SQLite itself: on a PostgreSQL run, starting a
// gateway in it skips it, saying why. For tests that reach SQLite's
// files or locks directly, where the harness cannot see it.
func SQLiteOnly(name, why string) { sqliteOnly.Store(name, why) }

func skipSQLiteOnly(t testing.TB) {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	if why, ok := sqliteOnly.Load(name); ok {
		SkipOnPostgres(t, why.(string))
	}
}

// RunOnPostgres runs `caddy run` from the Caddyfile on the PostgreSQL
// database at dsn, for a configuration that must not start, and returns
// what the process printed once it exited (within a minute) and how.
func RunOnPostgres(t testing.TB, dsn, caddyfile string, vars Vars) (string, error) {
	t.Helper()
	dir := t.TempDir()
	g := &Gateway{t: t, Dir: dir, DBPath: filepath.Join(dir, "gateway.db"), Config: filepath.Join(dir, "Caddyfile"), DSN: dsn,
		Port: FreePort(t), Admin: fmt.Sprintf("127.0.0.1:%d", FreePort(t))}
	g.writeConfig(caddyfile, vars)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), "run", "--config", g.Config, "--adapter", "caddyfile")
	cmd.Dir, cmd.Env = dir, g.environ()
	out, err := cmd.CombinedOutput()
	logs := &syncBuffer{}
	_, _ = logs.Write(out) // searched for keys at the end, as a running gateway's
	recordLogs(t.Name(), logs)
	return string(out), err
}
