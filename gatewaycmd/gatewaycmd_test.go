package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

// testEnv opens one SQLite file per test, as the Caddy layer opens the
// configured database per command.
func testEnv(t *testing.T) Env {
	path := filepath.Join(t.TempDir(), "gateway.db")
	return Env{
		OpenStore:     func(*cobra.Command) (store.Store, error) { return store.Open("sqlite", path) },
		ParseDuration: time.ParseDuration,
	}
}

// run runs `gateway args...` and returns its stdout.
func run(t *testing.T, e Env, args ...string) (string, error) {
	t.Helper()
	out, _, err := runWithStderr(t, e, args...)
	return out, err
}

// runWithStderr runs `caddy gateway args...` and returns its stdout and
// stderr; the root stands for Caddy's, which the gateway command is under.
func runWithStderr(t *testing.T, e Env, args ...string) (string, string, error) {
	t.Helper()
	return runWithStdin(t, e, "", args...)
}

// runWithStdin is runWithStderr with stdin.
func runWithStdin(t *testing.T, e Env, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := &cobra.Command{Use: "caddy", SilenceUsage: true, SilenceErrors: true}
	root.SetIn(strings.NewReader(stdin))
	gateway := &cobra.Command{Use: "gateway"}
	root.AddCommand(gateway)
	AddCommands(gateway, e)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"gateway"}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, e Env, args ...string) string {
	t.Helper()
	out, err := run(t, e, args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

// TestUsersAndKeys: an operator makes a user and a key, sees the key
// listed by prefix only, sets its limits, disables it and sets a password.
func TestUsersAndKeys(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann", "--quota", "5000", "--rpm", "7")
	var u struct {
		Username string       `json:"username"`
		Quota    int64        `json:"quota"`
		Limits   store.Limits `json:"limits"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, e, "user", "show", "--username", "ann")), &u); err != nil {
		t.Fatal(err)
	}
	if u.Username != "ann" || u.Quota != 5000 || u.Limits.RPM != 7 {
		t.Errorf("user show: %+v, want ann with 5000 units and rpm 7", u)
	}

	key := strings.TrimSpace(mustRun(t, e, "token", "add", "--username", "ann", "--name", "main"))
	if !strings.HasPrefix(key, keys.Prefix) || strings.Contains(key, "\n") {
		t.Fatalf("token add printed %q, want one key alone", key)
	}
	var tokens []*store.Token
	if err := json.Unmarshal([]byte(mustRun(t, e, "token", "list", "--username", "ann")), &tokens); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0].Name != "main" || strings.Contains(mustRun(t, e, "token", "list", "--username", "ann"), key) {
		t.Fatalf("token list: %+v, want one key named main, never the key itself", tokens)
	}
	id := tokens[0].ID

	var set store.Token
	if err := json.Unmarshal([]byte(mustRun(t, e, "token", "set", "--id", itoa(id), "--tpm", "900")), &set); err != nil {
		t.Fatal(err)
	}
	if set.Limits.TPM != 900 {
		t.Errorf("token set: limits %+v, want tpm 900", set.Limits)
	}
	if _, err := run(t, e, "token", "set", "--id", itoa(id), "--rpm", "-1"); err == nil || !strings.Contains(err.Error(), "--rpm must not be negative") {
		t.Errorf("a negative --rpm: %v, want refused by its name", err)
	}
	mustRun(t, e, "token", "disable", "--id", itoa(id))
	st := open(t, e)
	if tok, err := st.TokenByID(context.Background(), id); err != nil || tok.Status != store.TokenDisabled {
		t.Errorf("after token disable: %+v, %v", tok, err)
	}
	if _, err := run(t, e, "token", "enable", "--id", "999"); err == nil {
		t.Error("enabling a token that does not exist succeeded")
	}

	if pw := strings.TrimSpace(mustRun(t, e, "user", "passwd", "--username", "ann")); len(pw) != 20 {
		t.Errorf("user passwd printed %q, want a generated 20-character password", pw)
	}
	if _, err := run(t, e, "token", "add", "--username", "nobody"); err == nil || !strings.Contains(err.Error(), "caddy gateway user add") {
		t.Errorf("a key for an unknown user: %v, want told how to create the user", err)
	}
}

// TestUserAddPassword: user add reads the password from stdin, or makes
// and prints a random one, so it need not sit on the command line where
// anyone can list it; user passwd the same.
func TestUserAddPassword(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	if _, _, err := runWithStdin(t, e, "secret-from-stdin\n", "user", "add", "--username", "ann", "--password-stdin"); err != nil {
		t.Fatal(err)
	}
	if _, err := account.NewGate(open(t, e), account.GateConfig{}).LogIn(ctx, "192.0.2.1", "ann", "secret-from-stdin"); err != nil {
		t.Fatalf("the password read from stdin: %v", err)
	}
	var made struct {
		Username, Password string
	}
	if err := json.Unmarshal([]byte(mustRun(t, e, "user", "add", "--username", "bo")), &made); err != nil || made.Username != "bo" || len(made.Password) != 20 {
		t.Fatalf("user add without a password printed %+v, %v; want a generated 20-character password", made, err)
	}
	if _, err := account.NewGate(open(t, e), account.GateConfig{}).LogIn(ctx, "192.0.2.1", "bo", made.Password); err != nil {
		t.Fatalf("the generated password: %v", err)
	}
	if out := mustRun(t, e, "user", "add", "--username", "cy", "--password", "password-cy"); strings.Contains(out, "password-cy") {
		t.Fatalf("user add printed a password it was given: %s", out)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"user", "add", "--username", "di", "--password-stdin"}, "read no password"},
		{"x\n", []string{"user", "add", "--username", "di", "--password-stdin", "--password", "y"}, "not both"},
		{"short\n", []string{"user", "add", "--username", "di", "--password-stdin"}, "at least 8"},
	} {
		if _, _, err := runWithStdin(t, e, c.stdin, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v with %q on stdin: %v, want %q", c.args, c.stdin, err, c.want)
		}
	}
	if _, _, err := runWithStdin(t, e, "changed-on-stdin\r\n", "user", "passwd", "--username", "ann", "--password-stdin"); err != nil {
		t.Fatal(err)
	}
	if _, err := account.NewGate(open(t, e), account.GateConfig{}).LogIn(ctx, "192.0.2.1", "ann", "changed-on-stdin"); err != nil {
		t.Fatalf("the password passwd read from stdin: %v", err)
	}
}

// TestRedeemAdd: codes are printed one a line; rate limit flags are
// refused with where limits are set instead.
func TestRedeemAdd(t *testing.T) {
	e := testEnv(t)
	codes := strings.Fields(mustRun(t, e, "redeem", "add", "--quota", "1000", "--count", "3", "--expires", "1h"))
	if len(codes) != 3 || codes[0] == codes[1] {
		t.Fatalf("redeem add printed %q, want 3 distinct codes", codes)
	}
	if _, err := run(t, e, "redeem", "add", "--quota", "1000", "--tpm", "5"); err == nil || !strings.Contains(err.Error(), "caddy gateway user set") {
		t.Errorf("redeem add --tpm: %v, want refused with where limits are set", err)
	}
	if _, err := run(t, e, "redeem", "add", "--quota", "1000", "--expires", "soon"); err == nil {
		t.Error("redeem add --expires soon succeeded")
	}
}

// TestUsageExport: every row once, oldest first, across pages, in both
// formats; --since narrows it.
func TestUsageExport(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann")
	st := open(t, e)
	ctx := context.Background()
	u, err := st.UserByName(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour).UTC()
	var rows []*store.UsageLog
	for i := range exportPage + 5 {
		created := time.Now().UTC()
		if i < 2 {
			created = old
		}
		rows = append(rows, &store.UsageLog{Key: "row-" + itoa(int64(i)), CreatedAt: created, UserID: u.ID, Model: "m", Status: 200})
	}
	if err := st.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}

	recs, err := csv.NewReader(strings.NewReader(mustRun(t, e, "usage", "export", "--format", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rows)+1 || strings.Join(recs[0], ",") != strings.Join(usageCSVHeader, ",") {
		t.Fatalf("csv: %d records, header %v; want %d and the header", len(recs), recs[0], len(rows)+1)
	}
	var last int64
	for _, rec := range recs[1:] {
		id, err := strconv.ParseInt(rec[0], 10, 64)
		if err != nil || id <= last {
			t.Fatalf("csv row id %q after %d: want ids rising", rec[0], last)
		}
		last = id
	}
	lines := strings.Split(strings.TrimSpace(mustRun(t, e, "usage", "export", "--since", "24h")), "\n")
	if len(lines) != len(rows)-2 {
		t.Errorf("jsonl --since 24h: %d lines, want %d", len(lines), len(rows)-2)
	}
	if _, err := run(t, e, "usage", "export", "--format", "xml"); err == nil {
		t.Error("--format xml was accepted")
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := Env{ParseDuration: time.ParseDuration}
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "", want: time.Time{}},
		{in: "2026-01-31", want: time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)},
		{in: "2026-01-31T10:00:00Z", want: time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)},
		{in: "2h", want: now.Add(-2 * time.Hour)},
		{in: "-2h", bad: true},
		{in: "yesterday", bad: true},
	} {
		got, err := e.parseSince(tc.in, now)
		if tc.bad != (err != nil) || !tc.bad && !got.Equal(tc.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func open(t *testing.T, e Env) store.Store {
	t.Helper()
	st, err := e.OpenStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A plan made at runtime is known by its name while enabled; a database
// that cannot be opened knows none.
func TestRuntimePlanKnown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.db")
	st, err := store.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, it := range []*store.RuntimeItem{
		{Kind: store.RuntimePlan, Name: "pro", Config: "{}"},
		{Kind: store.RuntimePlan, Name: "old", Config: "{}", Disabled: true},
		{Kind: store.RuntimeChannel, Name: "chan", Config: "{}"},
	} {
		if err := st.PutRuntime(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for name, want := range map[string]bool{"pro": true, "old": false, "chan": false, "none": false} {
		if got := RuntimePlanKnown("sqlite", path, name); got != want {
			t.Errorf("%s: known = %v, want %v", name, got, want)
		}
	}
	if RuntimePlanKnown("nodriver", path, "pro") {
		t.Error("a database that cannot be opened knows a plan")
	}
}
