package integration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// cliCaddyfile is a priced demo model behind key auth and the account API,
// with its database at the default path, relative to where it runs, as
// Caddyfile.example has it.
const cliCaddyfile = `{
	admin {{ADMIN}}
	gateway {
		database sqlite ./data/gateway.db
		token_cache_ttl 1s
		channel demo {
			type demo
			models demo
		}
		price demo {
			input 1
			output 2
		}
	}
}

http://127.0.0.1:{{PORT}} {
	@account path /api/user/*
	route @account {
		gateway_account
	}
	route /v1/* {
		gateway_auth
		gateway_relay
	}
}
`

// cacheTTLBound is how long a change made with the CLI may take to reach
// the running gateway: the key cache's TTL (1s above), a background
// reload, and the ledger's refresh on the same tick.
const cacheTTLBound = 5 * time.Second

// TestCLIAgainstARunningGateway: an operator's changes made with the real
// binary reach a serving gateway within the token cache TTL, as the design
// says: a user's balance set in dollars or units, a user disabled and
// enabled, a key deleted.
func TestCLIAgainstARunningGateway(t *testing.T) {
	g := gatewaytest.Start(t, cliCaddyfile, nil)

	var users []struct {
		Username  string `json:"username"`
		Role      string `json:"role"`
		CreatedAt string `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(g.CLI("user", "list")), &users); err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0].Username != "root" || users[0].Role != "root" {
		t.Fatalf("user list on a new gateway: %+v, want the root user it made", users)
	}
	if _, err := time.Parse(time.RFC3339, users[0].CreatedAt); err != nil {
		t.Errorf("created_at %q is not RFC 3339", users[0].CreatedAt)
	}

	key := g.AddUser("cli", 0, "--name", "main")
	chat := func() (int, string) {
		resp, body := g.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`), nil)
		e, _ := errorBody(body)
		return resp.StatusCode, e.Code
	}
	if status, code := chat(); status != 429 || code != "insufficient_quota" {
		t.Fatalf("a user with no quota: %d %s, want 429 insufficient_quota", status, code)
	}

	g.CLI("user", "quota", "--username", "cli", "--add-usd", "1")
	within(t, cacheTTLBound, "a balance added with the CLI to be spendable", func() bool {
		status, _ := chat()
		return status == 200
	})

	g.CLI("user", "disable", "--username", "cli")
	var code string
	within(t, cacheTTLBound, "a user disabled with the CLI to be refused", func() bool {
		_, code = chat()
		return code == "user_disabled"
	})
	g.CLI("user", "enable", "--username", "cli")
	within(t, cacheTTLBound, "a user enabled again to be served", func() bool {
		status, _ := chat()
		return status == 200
	})

	var set struct {
		Quota int64 `json:"quota"`
	}
	if err := json.Unmarshal([]byte(g.CLI("user", "quota", "--username", "cli", "--set", "0")), &set); err != nil || set.Quota != 0 {
		t.Fatalf("user quota --set 0 printed quota %d (%v)", set.Quota, err)
	}
	within(t, cacheTTLBound, "a balance set to zero with the CLI to be refused", func() bool {
		_, code = chat()
		return code == "insufficient_quota"
	})

	g.CLI("user", "quota", "--username", "cli", "--add", "1000000")
	within(t, cacheTTLBound, "the balance to be spendable again", func() bool {
		status, _ := chat()
		return status == 200
	})
	var tokens []struct {
		ID        int64   `json:"id"`
		ExpiresAt *string `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(g.CLI("token", "list", "--username", "cli")), &tokens); err != nil || len(tokens) != 1 {
		t.Fatalf("token list: %+v (%v), want the one key", tokens, err)
	}
	if tokens[0].ExpiresAt != nil {
		t.Errorf("a key that never expires lists expires_at %q, want null", *tokens[0].ExpiresAt)
	}
	g.CLI("token", "delete", "--id", fmt.Sprint(tokens[0].ID))
	within(t, cacheTTLBound, "a key deleted with the CLI to stop working", func() bool {
		status, _ := chat()
		return status == 401
	})
	if out := strings.TrimSpace(g.CLI("token", "list", "--username", "cli")); out != "[]" {
		t.Errorf("token list after the only key was deleted: %q, want []", out)
	}
}

// TestCLIMistakesExitNonZero: the real binary answers a wrong command line
// with one line on stderr, nothing on stdout, and a failing exit status.
func TestCLIMistakesExitNonZero(t *testing.T) {
	g := gatewaytest.Start(t, cliCaddyfile, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `caddy gateway has no command "frob"`},
		{[]string{"user", "lst"}, `caddy gateway user has no command "lst" (did you mean "list"?)`},
		{[]string{"token"}, "caddy gateway token needs a command: one of add, budget, delete, disable, enable, list, rename, set"},
		{[]string{"redeem", "remove"}, `caddy gateway redeem has no command "remove"`},
		{[]string{"token", "delete"}, "--id is required: caddy gateway token delete --id <token id>"},
		{[]string{"user", "show"}, "--username is required"},
		{[]string{"user", "show", "--username", "nobody"}, `no user named "nobody"`},
		{[]string{"redeem", "add", "--quota", "5", "--rpm", "3"}, "a redemption code adds quota only"},
	} {
		stdout, stderr, err := g.TryCLI(tc.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("caddy gateway %s: %v, want a failing exit status", strings.Join(tc.args, " "), err)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("caddy gateway %s: stdout %q, stderr %q; want nothing, and one line saying %q", strings.Join(tc.args, " "), stdout, stderr, tc.want)
		}
	}
}

// TestCLIRecoveryCommandWorksAsPrinted: the command the gateway prints to
// reset the root password works as printed, typed in a directory that has
// the gateway's default database but no Caddyfile (the project root after
// 'make run', which runs Caddyfile.example).
func TestCLIRecoveryCommandWorksAsPrinted(t *testing.T) {
	g := gatewaytest.Start(t, cliCaddyfile, nil)
	printed := regexp.MustCompile(`change it with: caddy (gateway [^\n]+)`).FindStringSubmatch(g.Logs())
	if printed == nil {
		t.Fatalf("the gateway printed no recovery command:\n%s", g.Logs())
	}
	root := t.TempDir()
	if err := os.Symlink(filepath.Join(g.Dir, "data"), filepath.Join(root, "data")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewaytest.Binary(t), strings.Fields(printed[1])...)
	cmd.Dir = root
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("caddy %s, as printed: %v\n%s", printed[1], err, stderr.String())
	}
	password := strings.TrimSpace(stdout.String())
	gatewaytest.Secret(password)
	body, _ := json.Marshal(map[string]string{"username": "root", "password": password})
	if resp, answer := g.Do(http.MethodPost, "/api/user/login", "", body, nil); resp.StatusCode != 200 {
		t.Errorf("logging in with the password the recovery command set: %d %s", resp.StatusCode, answer)
	}

	// with neither a Caddyfile nor that database, it says what to pass
	cmd = exec.Command(gatewaytest.Binary(t), strings.Fields(printed[1])...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pass --config") {
		t.Errorf("the recovery command where there is no config: %v\n%s", err, out)
	}
}

// TestCSVExportsShowTextAsText: text a client chose (a request id such as
// "=1+1") and an administrator's batch name reach the CSV exports with a
// leading apostrophe, so a spreadsheet shows them rather than runs them
// as formulas.
func TestCSVExportsShowTextAsText(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	key := g.AddUser("sheet", 10_000_000)
	body := []byte(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	if resp, b := g.Do(http.MethodPost, "/v1/chat/completions", key, body, http.Header{"X-Request-Id": {"=1+1"}}); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	g.WaitUsage("sheet", 1)
	recs, err := csv.NewReader(strings.NewReader(g.CLI("usage", "export", "--format", "csv"))).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("export: %q, %v", recs, err)
	}
	if id := recs[1][slices.Index(recs[0], "request_id")]; id != "'=1+1" {
		t.Fatalf("the request id exported as %q, want '=1+1", id)
	}

	admin := loggedIn(t, g, "boss", 0, "admin")
	admin.ok(http.MethodPost, "/api/admin/codes", map[string]any{"name": "@SUM(A1)", "count": 1, "quota": 1})
	a := admin.ok(http.MethodGet, "/api/admin/codes/export", nil)
	codes, err := csv.NewReader(bytes.NewReader(a.body)).ReadAll()
	if err != nil || len(codes) != 2 || codes[1][1] != "'@SUM(A1)" {
		t.Fatalf("codes export: %q, %v; want the batch name as '@SUM(A1)", codes, err)
	}
}

// TestCLIMoneyInUSD: every command that takes money takes it in USD too
// (--usd), and an amount in units under one cent is accepted with a
// warning saying what it is in USD ("redeem add --quota 5" mints
// $0.000005).
func TestCLIMoneyInUSD(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	g.CLI("user", "add", "--username", "payer", "--password", "password-payer", "--quota", "0")
	redeemed := func(code string) int64 {
		t.Helper()
		before, _ := g.Quota("payer")
		c := newClient(t, g)
		c.login("payer")
		c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": strings.TrimSpace(code)})
		after, _ := g.Quota("payer")
		return after - before
	}
	stdout, stderr, err := g.TryCLI("redeem", "add", "--usd", "5")
	if err != nil || strings.Contains(stderr, "warning") {
		t.Fatalf("redeem add --usd 5: %v %s", err, stderr)
	}
	if got := redeemed(stdout); got != 5_000_000 {
		t.Fatalf("a code of --usd 5 added %d units, want 5000000", got)
	}
	stdout, stderr, err = g.TryCLI("redeem", "add", "--usd", "0.25", "--count", "1")
	if err != nil || redeemed(stdout) != 250_000 {
		t.Fatalf("redeem add --usd 0.25: %v %s", err, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"redeem", "add", "--quota", "5"}, "warning: --quota 5 is 5 units, 0.000005 USD"},
		{[]string{"token", "add", "--username", "payer", "--quota", "20"}, "warning: --quota 20 is 20 units, 0.00002 USD"},
		{[]string{"user", "quota", "--username", "payer", "--add", "5"}, "for 5 USD pass --add-usd 5"},
	} {
		if _, stderr, err := g.TryCLI(tc.args...); err != nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("caddy gateway %s: %v, stderr %q; want it done, with %q", strings.Join(tc.args, " "), err, stderr, tc.want)
		}
	}
	if _, stderr, err := g.TryCLI("redeem", "add", "--quota", "1000000"); err != nil || stderr != "" {
		t.Errorf("redeem add --quota 1000000: %v, stderr %q; want no warning", err, stderr)
	}
	if _, stderr, err := g.TryCLI("redeem", "add", "--usd", "5", "--quota", "5"); err == nil {
		t.Errorf("redeem add with both --usd and --quota: accepted (%s)", stderr)
	}
	if _, stderr, err := g.TryCLI("redeem", "add", "--usd", "0.0000001"); err == nil || !strings.Contains(stderr, "at most six decimals") {
		t.Errorf("redeem add --usd 0.0000001: %v %s", err, stderr)
	}

	// a key's own limit in USD
	g.TryCLI("token", "add", "--username", "payer", "--name", "in-usd", "--usd", "2")
	u, err := g.Store().UserByName(t.Context(), "payer")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := g.Store().ListTokens(t.Context(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tk := range tokens {
		if tk.Name == "in-usd" {
			found = tk.QuotaLimit == 2_000_000
		}
	}
	if !found {
		t.Fatalf("token add --usd 2: no key named in-usd limited to 2000000 units: %+v", tokens)
	}

	// a new user's starting balance in USD
	g.CLI("user", "add", "--username", "rich", "--password", "password-rich", "--usd", "3")
	if q, _ := g.Quota("rich"); q != 3_000_000 {
		t.Fatalf("user add --usd 3: quota %d, want 3000000", q)
	}
	if _, stderr, _ := g.TryCLI("user", "add", "--username", "poor", "--password", "password-poor", "--quota", "3"); !strings.Contains(stderr, "warning: --quota 3 is 3 units") {
		t.Errorf("user add --quota 3: stderr %q, want the under-a-cent warning", stderr)
	}
}

// TestCLIPlanCodesNeedThePlan: 'redeem add --plan' where no configuration
// can be read (so the plan cannot be checked) mints nothing, and a code
// granting a plan the gateway does not define (minted before the check,
// or the plan since removed) is refused at redemption, unused.
func TestCLIPlanCodesNeedThePlan(t *testing.T) {
	g := gatewaytest.Start(t, cliCaddyfile, nil)
	// the gateway's database, without its Caddyfile
	root := t.TempDir()
	if err := os.Symlink(filepath.Join(g.Dir, "data"), filepath.Join(root, "data")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewaytest.Binary(t), "gateway", "redeem", "add", "--plan", "pro", "--days", "30")
	cmd.Dir = root
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// (on PostgreSQL the database too is found only through the
	// configuration: the command stops before that)
	err := cmd.Run()
	if err == nil || stdout.String() != "" || !gatewaytest.OnPostgres() && !strings.Contains(stderr.String(), "needs the gateway's configuration") {
		t.Fatalf("redeem add --plan with no configuration: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	if list := strings.TrimSpace(g.CLI("redeem", "list")); list != "[]" {
		t.Fatalf("codes minted: %s", list)
	}

	// a code of a plan the configuration does not define
	g = startAccounts(t, "on", 1000)
	if err := g.Store().CreateRedemptionCodes(t.Context(), []*store.RedemptionCode{{Code: "GHOST-PLAN-CODE", Status: store.CodeEnabled, Plan: "ghost", PlanDays: 30}}); err != nil {
		t.Fatal(err)
	}
	g.CLI("user", "add", "--username", "hopeful", "--password", "password-hopeful", "--quota", "0")
	c := newClient(t, g)
	c.login("hopeful")
	r := c.do(http.MethodPost, "/api/user/topup", map[string]string{"key": "GHOST-PLAN-CODE"})
	e, ok := errorBody(r.body)
	if r.status != http.StatusBadRequest || !ok || e.Code != "unknown_plan" || !strings.Contains(e.Message, `"ghost"`) {
		t.Fatalf("redeeming a code of an unknown plan: %d %s", r.status, r.body)
	}
	codes, err := g.Store().ListRedemptionCodes(t.Context(), store.CodeFilter{})
	if err != nil || len(codes) != 1 || codes[0].UsedBy != 0 {
		t.Fatalf("the code after the refusal: %+v (%v)", codes, err)
	}
}
