package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/internal/pgtest"
)

// The gateway on PostgreSQL (`database postgres <dsn>`): its password kept
// out of every log line, error and answer; the CLI; a server that is down
// at start or goes down mid-run.

// withPassword puts {env.name} as the password into a pgtest DSN, as a
// deployment keeps it out of the configuration (the test cluster trusts
// loopback, so any password connects), and sets name to a fresh secret.
func withPassword(t *testing.T, dsn, name string) (configured, password string) {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	password = "pg-pw-" + hex.EncodeToString(b)
	t.Setenv(name, password)
	gatewaytest.Secret(password)
	return strings.Replace(dsn, "postgres://postgres@", "postgres://postgres:{env."+name+"}@", 1), password
}

// TestPostgresPasswordStaysSecret: a gateway on PostgreSQL with a password
// in its DSN serves and bills, and the password is in no log line, no
// admin API answer, no health answer; nor in the error of a reload to an
// unreachable server, which names it redacted.
func TestPostgresPasswordStaysSecret(t *testing.T) {
	dsn, password := withPassword(t, gatewaytest.PostgresDatabase(t), "GATEWAY_TEST_PG_PASSWORD")
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	vars := gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"}
	cfg := billingConfig("").withSite(
		block("handle /readyz", "gateway_health ready"),
		relayRoute)
	gw := gatewaytest.StartOnPostgres(t, dsn, cfg.String(), vars)
	key := gw.AddUser("pia", 1_000_000)
	if r := chat(t, gw, key, "gpt-4o-mini", false); r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	checkBooks(t, gw, "pia", 1_000_000, 1, 1)
	if !strings.Contains(gw.Logs(), `"driver":"postgres"`) || !strings.Contains(gw.Logs(), `postgres://postgres:xxxxx@127.0.0.1:`) {
		t.Fatalf("no database opened on PostgreSQL, named with its password redacted:\n%s", gw.Logs())
	}

	for _, path := range []string{"/config/", "/config/apps/gateway/database"} {
		resp, err := http.Get("http://" + gw.Admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || strings.Contains(string(b), password) || !strings.Contains(string(b), "{env.GATEWAY_TEST_PG_PASSWORD}") {
			t.Fatalf("admin %s: %d %s %v", path, resp.StatusCode, b, err)
		}
	}
	resp, body := gw.Do(http.MethodGet, "/readyz", "", nil, nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), password) || strings.Contains(string(body), "127.0.0.1") {
		t.Fatalf("readyz: %d %s", resp.StatusCode, body)
	}

	// a reload to a server nobody runs fails, naming it without the password
	gw.DSN = fmt.Sprintf("postgres://postgres:{env.GATEWAY_TEST_PG_PASSWORD}@127.0.0.1:%d/gateway?sslmode=disable&connect_timeout=5", gatewaytest.FreePort(t))
	out, err := gw.TryReload(cfg.String(), vars)
	gw.DSN = dsn
	if err == nil || !strings.Contains(out, "postgres://postgres:xxxxx@127.0.0.1") || strings.Contains(out, password) {
		t.Fatalf("reload to an unreachable database: %v\n%s", err, out)
	}
	// the running configuration is untouched
	if r := chat(t, gw, key, "gpt-4o-mini", false); r.status != 200 {
		t.Fatalf("chat after the failed reload: %d %s", r.status, r.body)
	}
	if strings.Contains(gw.Logs(), password) {
		t.Fatal("the password reached the log") // Main would say where
	}
}

// TestPostgresLiteralPasswordWarns: a password written into the DSN itself
// works, and the gateway warns that the admin API serves it, without
// printing it.
func TestPostgresLiteralPasswordWarns(t *testing.T) {
	dsn, password := withPassword(t, gatewaytest.PostgresDatabase(t), "GATEWAY_TEST_PG_PASSWORD")
	literal := strings.Replace(dsn, "{env.GATEWAY_TEST_PG_PASSWORD}", password, 1)
	gw := gatewaytest.StartOnPostgres(t, literal, gatewayConfig().channel("demo", "demo", "", "", "demo").free("demo").String(), nil)
	key := gw.AddUser("lee", 1000)
	if resp, body := gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`), nil); resp.StatusCode != 200 {
		t.Fatalf("demo: %d %s", resp.StatusCode, body)
	}
	logs := gw.Logs()
	if !strings.Contains(logs, "holds a password, which the admin API serves") || strings.Contains(logs, password) {
		t.Fatalf("want the warning, without the password:\n%s", logs)
	}
}

// TestPostgresUnreachableAtStart: a gateway whose PostgreSQL server is down
// does not start (as one whose SQLite file cannot be opened): it serves
// nothing unbilled, and says which server, without the password.
func TestPostgresUnreachableAtStart(t *testing.T) {
	dsn, password := withPassword(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/gateway?sslmode=disable&connect_timeout=5", gatewaytest.FreePort(t)), "GATEWAY_TEST_PG_PASSWORD")
	out, err := gatewaytest.RunOnPostgres(t, dsn, gatewayConfig().String(), nil)
	if err == nil {
		t.Fatalf("the gateway ran without its database:\n%s", out)
	}
	if !strings.Contains(out, "postgres://postgres:xxxxx@127.0.0.1") || strings.Contains(out, password) {
		t.Fatalf("start error:\n%s", out)
	}
}

// TestPostgresCLI: the operator commands work on PostgreSQL as the README
// shows them, with Caddyfile.example and the database in GATEWAY_DB_DRIVER
// and GATEWAY_DB (its password in PGPASSWORD); a gateway started from the
// same file serves the key the CLI made.
func TestPostgresCLI(t *testing.T) {
	dsn := gatewaytest.PostgresDatabase(t)
	t.Setenv("GATEWAY_DB_DRIVER", "postgres")
	t.Setenv("GATEWAY_DB", dsn)
	t.Setenv("PGPASSWORD", "pg-pw-from-the-environment")
	gatewaytest.Secret("pg-pw-from-the-environment")
	example, err := filepath.Abs(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gatewaytest.Binary(t), append(append([]string{"gateway"}, args...), "--config", example)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+cmd.Dir)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("caddy gateway %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	cli("user", "add", "--username", "ops", "--password", "password-ops", "--quota", "5000000")
	key := strings.TrimSpace(cli("token", "add", "--username", "ops"))
	gatewaytest.Secret(key)
	codes := strings.Fields(cli("redeem", "add", "--quota", "1000", "--count", "2"))
	if !strings.HasPrefix(key, "sk-") || len(codes) != 2 {
		t.Fatalf("token %q, codes %q", key, codes)
	}

	port := gatewaytest.FreePort(t)
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port))
	t.Setenv("GATEWAY_ADMIN", fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t)))
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewaytest.Start(t, string(text), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	gw.DSN = dsn
	resp, body := gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"demo","messages":[{"role":"user","content":"Hello"}]}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("demo with the CLI's key: %d %s", resp.StatusCode, body)
	}
	gw.WaitUsage("ops", 1)
	if export := cli("usage", "export", "--format", "jsonl"); strings.Count(export, "\n") != 1 || !strings.Contains(export, `"demo"`) {
		t.Fatalf("usage export: %q", export)
	}
	if u, err := gw.Store().UserByName(context.Background(), "ops"); err != nil || u.Quota != 5_000_000 {
		t.Fatalf("the CLI's user as stored: %+v, %v", u, err)
	}
}

// TestPostgresDownMidRun stops the PostgreSQL server under load and starts
// it again: meanwhile each request is served (its row held in the usage
// journal, its cost counted against the balance) or refused with 503,
// never served unbilled; readiness says 503 without naming the server;
// once it is back every served request has its row, once, and the
// balance matches.
func TestPostgresDownMidRun(t *testing.T) {
	cluster, err := pgtest.New() // of its own: it is stopped mid-run
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	})
	dsn, password := withPassword(t, cluster.Database(t), "GATEWAY_TEST_PG_PASSWORD")
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	cfg := billingConfig(block("usage", "retry_interval 50ms")).withSite(
		block("handle /readyz", "gateway_health ready"),
		relayRoute)
	gw := gatewaytest.StartOnPostgres(t, dsn, cfg.String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	const quota = 100_000_000
	key := gw.AddUser("dana", quota)
	l := startLoad(t, gw, key, "gpt-4o-mini", 4)
	l.waitSent(t, 30)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "readyz to answer 503", func() bool {
		resp, body := gw.Do(http.MethodGet, "/readyz", "", nil, nil)
		if strings.Contains(string(body), password) || strings.Contains(string(body), "127.0.0.1") {
			t.Fatalf("readyz names the database: %s", body)
		}
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), `"store":{"ok":false`)
	})
	l.waitSent(t, 30)
	// a key the gateway has not seen cannot be checked: 503, not 401
	if r := chat(t, gw, "sk-never-seen-0123456789abcdef0123456789abcdef", "gpt-4o-mini", false); r.status != http.StatusServiceUnavailable {
		t.Fatalf("an unknown key while the database is down: %d %s", r.status, r.body)
	}
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "readyz to answer 200 again", func() bool {
		resp, _ := gw.Do(http.MethodGet, "/readyz", "", nil, nil)
		return resp.StatusCode == http.StatusOK
	})
	l.waitSent(t, 30)
	counts := l.finish()
	t.Logf("answers while the server went down and came back: %v", counts)
	for status := range counts {
		if status != 200 && status != http.StatusServiceUnavailable {
			t.Fatalf("answers %v: a request was neither served nor refused with 503", counts)
		}
	}
	// every served request is billed once; a refused one costs nothing,
	// and each has its row (waiting for the served ones' alone read the
	// rows while the refused ones' were still coming: CI, 957 of 959)
	checkBooks(t, gw, "dana", quota, counts[200]+counts[http.StatusServiceUnavailable], counts[200])
}
