package gatewaycmd

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/store"
)

// decode runs a command and decodes the JSON it printed into v.
func decode(t *testing.T, e Env, v any, args ...string) {
	t.Helper()
	out := mustRun(t, e, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// wantError runs a command that must fail and checks its one-line error.
func wantError(t *testing.T, e Env, want string, args ...string) {
	t.Helper()
	out, err := run(t, e, args...)
	switch {
	case err == nil:
		t.Errorf("%s succeeded, printing %q; want the error %q", strings.Join(args, " "), out, want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: %q, want it to say %q", strings.Join(args, " "), err, want)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: %q is more than one line", strings.Join(args, " "), err)
	}
}

type userJSON struct {
	ID        int64   `json:"id"`
	Username  string  `json:"username"`
	Role      string  `json:"role"`
	Status    string  `json:"status"`
	Quota     int64   `json:"quota"`
	CreatedAt *string `json:"created_at"`
}

var rfc3339UTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// TestUserList: an empty page is [], users come in id order, a full page
// says on stderr how to continue, and times are RFC 3339.
func TestUserList(t *testing.T) {
	e := testEnv(t)
	if out := strings.TrimSpace(mustRun(t, e, "user", "list")); out != "[]" {
		t.Errorf("user list on an empty database printed %q, want []", out)
	}
	for _, name := range []string{"ann", "bea", "cy"} {
		mustRun(t, e, "user", "add", "--username", name, "--password", "password-"+name)
	}
	var page []userJSON
	out, errOut, err := runWithStderr(t, e, "user", "list", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].Username != "ann" || page[1].Username != "bea" {
		t.Fatalf("user list --limit 2: %+v, want ann and bea", page)
	}
	if want := "caddy gateway user list --after-id " + itoa(page[1].ID); !strings.Contains(errOut, want) {
		t.Errorf("a full page's stderr %q does not say %q", errOut, want)
	}
	if page[0].CreatedAt == nil || !rfc3339UTC.MatchString(*page[0].CreatedAt) {
		t.Errorf("created_at %v, want an RFC 3339 time in UTC", page[0].CreatedAt)
	}
	out, errOut, err = runWithStderr(t, e, "user", "list", "--after-id", itoa(page[1].ID))
	if err != nil {
		t.Fatal(err)
	}
	page = nil
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].Username != "cy" || errOut != "" {
		t.Errorf("the next page: %+v (stderr %q), want cy alone and nothing on stderr", page, errOut)
	}
	wantError(t, e, "--limit must be from 1 to 1000", "user", "list", "--limit", "0")
	wantError(t, e, "--after-id must be a user id", "user", "list", "--after-id", "-1")
}

// TestUserStatusAndRole: disable, enable and role go through the account
// rules and print the user as they then are; a disabled user's sessions end.
func TestUserStatusAndRole(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann")
	st := open(t, e)
	ctx := context.Background()
	u, err := st.UserByName(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, &store.Session{IDHash: "h", UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	var got userJSON
	decode(t, e, &got, "user", "disable", "--username", "ann")
	if got.Status != store.UserDisabled {
		t.Errorf("user disable printed status %q", got.Status)
	}
	if _, err := st.SessionByHash(ctx, "h"); err == nil {
		t.Error("a disabled user's session still works")
	}
	decode(t, e, &got, "user", "enable", "--username", "ann")
	if u, _ := st.UserByName(ctx, "ann"); got.Status != store.UserEnabled || u.Status != store.UserEnabled {
		t.Errorf("user enable: printed %q, stored %q", got.Status, u.Status)
	}
	decode(t, e, &got, "user", "role", "--username", "ann", "--role", "admin")
	if u, _ := st.UserByName(ctx, "ann"); got.Role != store.RoleAdmin || u.Role != store.RoleAdmin {
		t.Errorf("user role: printed %q, stored %q", got.Role, u.Role)
	}
	wantError(t, e, `role must be user, admin or root, not "boss"`, "user", "role", "--username", "ann", "--role", "boss")
	wantError(t, e, "--role is required", "user", "role", "--username", "ann")
	wantError(t, e, `no user named "bob"`, "user", "disable", "--username", "bob")
}

// TestUserQuota: a balance is added to or set, in units or in USD, and
// never taken below zero.
func TestUserQuota(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann", "--quota", "1000")
	for _, step := range []struct {
		args []string
		want int64
	}{
		{[]string{"--add", "500"}, 1500},
		{[]string{"--add", "-200"}, 1300},
		{[]string{"--add-usd", "1.25"}, 1_251_300},
		{[]string{"--add-usd", "-0.000300"}, 1_251_000},
		{[]string{"--set", "42"}, 42},
		{[]string{"--set", "42"}, 42},
		{[]string{"--set-usd", "2"}, 2_000_000},
		{[]string{"--set-usd", "0"}, 0},
	} {
		var got userJSON
		decode(t, e, &got, append([]string{"user", "quota", "--username", "ann"}, step.args...)...)
		if got.Quota != step.want {
			t.Errorf("user quota %v: printed %d, want %d", step.args, got.Quota, step.want)
		}
		if u, _ := open(t, e).UserByName(context.Background(), "ann"); u.Quota != step.want {
			t.Errorf("user quota %v: stored %d, want %d", step.args, u.Quota, step.want)
		}
	}
	quota := func(args ...string) []string { return append([]string{"user", "quota", "--username", "ann"}, args...) }
	wantError(t, e, "below zero", quota("--add", "-1")...)
	wantError(t, e, "--set must not be negative", quota("--set", "-5")...)
	wantError(t, e, "give one of --add, --set, --add-usd or --set-usd, not 0", quota()...)
	wantError(t, e, "not 2", quota("--add", "1", "--set-usd", "1")...)
	wantError(t, e, `--add-usd must be an amount of USD with at most six decimals, such as 5 or 0.25, not "0.0000001"`, quota("--add-usd", "0.0000001")...)
	wantError(t, e, `not "five"`, quota("--set-usd", "five")...)
	wantError(t, e, `not "-"`, quota("--add-usd", "-")...)
	wantError(t, e, "--username is required", "user", "quota", "--add", "5")
}

type tokenJSON struct {
	ID        int64   `json:"id"`
	UserID    int64   `json:"user_id"`
	Name      string  `json:"name"`
	Status    string  `json:"status"`
	ExpiresAt *string `json:"expires_at"`
	CreatedAt *string `json:"created_at"`
	Models    []string
}

// TestTokenCommands: a key that never expires shows null, renames keep
// everything else, deletes are for good, and a missing key is one sentence.
func TestTokenCommands(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann")
	if out := strings.TrimSpace(mustRun(t, e, "token", "list", "--username", "ann")); out != "[]" {
		t.Errorf("token list of a user with no keys printed %q, want []", out)
	}
	mustRun(t, e, "token", "add", "--username", "ann", "--name", "forever", "--models", "m1,m2", "--rpm", "3")
	mustRun(t, e, "token", "add", "--username", "ann", "--name", "brief", "--expires", "1h")
	var tokens []tokenJSON
	decode(t, e, &tokens, "token", "list", "--username", "ann")
	if len(tokens) != 2 {
		t.Fatalf("token list: %+v, want 2 keys", tokens)
	}
	byName := map[string]tokenJSON{}
	for _, tk := range tokens {
		byName[tk.Name] = tk
	}
	if tk := byName["forever"]; tk.ExpiresAt != nil || tk.CreatedAt == nil || !rfc3339UTC.MatchString(*tk.CreatedAt) {
		t.Errorf("a key that never expires: expires_at %v, created_at %v; want null and an RFC 3339 time", tk.ExpiresAt, tk.CreatedAt)
	}
	if tk := byName["brief"]; tk.ExpiresAt == nil || !rfc3339UTC.MatchString(*tk.ExpiresAt) {
		t.Errorf("a key that expires: expires_at %v, want an RFC 3339 time", tk.ExpiresAt)
	}
	forever := byName["forever"]
	if tk, _ := open(t, e).TokenByID(context.Background(), forever.ID); tk.Limits.RPM != 3 {
		t.Errorf("token add --rpm 3 stored limits %+v", tk.Limits)
	}

	var renamed tokenJSON
	decode(t, e, &renamed, "token", "rename", "--id", itoa(forever.ID), "--name", "always")
	if renamed.Name != "always" || renamed.ExpiresAt != nil || strings.Join(renamed.Models, ",") != "m1,m2" || renamed.UserID != forever.UserID {
		t.Errorf("token rename printed %+v, want the name changed and nothing else", renamed)
	}
	if tk, _ := open(t, e).TokenByID(context.Background(), forever.ID); tk.Name != "always" || len(tk.Models) != 2 {
		t.Errorf("token rename stored %+v", tk)
	}
	wantError(t, e, "--name must not be blank", "token", "rename", "--id", itoa(forever.ID), "--name", "  ")
	wantError(t, e, "--name is required", "token", "rename", "--id", itoa(forever.ID))

	var disabled tokenJSON
	decode(t, e, &disabled, "token", "disable", "--id", itoa(forever.ID))
	if disabled.Status != store.TokenDisabled {
		t.Errorf("token disable printed %+v", disabled)
	}

	var deleted tokenJSON
	decode(t, e, &deleted, "token", "delete", "--id", itoa(forever.ID))
	if deleted.ID != forever.ID {
		t.Errorf("token delete printed %+v, want the deleted key", deleted)
	}
	if _, err := open(t, e).TokenByID(context.Background(), forever.ID); err == nil {
		t.Error("the deleted key is still stored")
	}
	wantError(t, e, "no token with id "+itoa(forever.ID), "token", "delete", "--id", itoa(forever.ID))
	wantError(t, e, "no token with id 999", "token", "set", "--id", "999", "--rpm", "1")
	wantError(t, e, "no token with id 999", "token", "enable", "--id", "999")
	wantError(t, e, `no user named "bob"`, "token", "list", "--username", "bob")
}

type codeJSON struct {
	ID         int64   `json:"id"`
	Code       string  `json:"code"`
	Quota      int64   `json:"quota"`
	Status     string  `json:"status"`
	CreatedAt  *string `json:"created_at"`
	RedeemedAt *string `json:"redeemed_at"`
	ExpiresAt  *string `json:"expires_at"`
}

// TestRedeemListAndDisable: codes newest first in pages, null for not yet
// redeemed and never expiring, and a disabled code refused when redeemed.
func TestRedeemListAndDisable(t *testing.T) {
	e := testEnv(t)
	if out := strings.TrimSpace(mustRun(t, e, "redeem", "list")); out != "[]" {
		t.Errorf("redeem list with no codes printed %q, want []", out)
	}
	first := strings.Fields(mustRun(t, e, "redeem", "add", "--quota", "700", "--count", "2"))
	mustRun(t, e, "redeem", "add", "--quota", "900", "--expires", "1h")

	var codes []codeJSON
	out, errOut, err := runWithStderr(t, e, "redeem", "list", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &codes); err != nil {
		t.Fatal(err)
	}
	if len(codes) != 2 || codes[0].Quota != 900 || codes[1].Code != first[1] {
		t.Fatalf("redeem list --limit 2: %+v, want the newest two", codes)
	}
	if c := codes[0]; c.ExpiresAt == nil || !rfc3339UTC.MatchString(*c.ExpiresAt) || c.RedeemedAt != nil || c.Status != store.CodeEnabled {
		t.Errorf("a fresh code that expires: %+v, want an RFC 3339 expiry, redeemed_at null, enabled", c)
	}
	if want := "--before-id " + itoa(codes[1].ID); !strings.Contains(errOut, want) {
		t.Errorf("a full page's stderr %q does not say %q", errOut, want)
	}
	codes = nil
	decode(t, e, &codes, "redeem", "list", "--before-id", itoa(codeID(t, e, first[1])))
	if len(codes) != 1 || codes[0].Code != first[0] || codes[0].ExpiresAt != nil {
		t.Errorf("the next page: %+v, want the first code, never expiring", codes)
	}

	var disabled codeJSON
	decode(t, e, &disabled, "redeem", "disable", "--id", itoa(codes[0].ID))
	if disabled.Status != store.CodeDisabled || disabled.Code != first[0] {
		t.Errorf("redeem disable printed %+v", disabled)
	}
	st := open(t, e)
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann")
	u, _ := st.UserByName(context.Background(), "ann")
	if _, err := st.Redeem(context.Background(), first[0], u.ID); err == nil {
		t.Error("a disabled code was redeemed")
	}
	mustRun(t, e, "redeem", "enable", "--id", itoa(codes[0].ID))
	if n, err := st.Redeem(context.Background(), first[0], u.ID); err != nil || n != 700 {
		t.Errorf("redeeming the code enabled again: %d, %v", n, err)
	}
	wantError(t, e, "no redemption code with id 99", "redeem", "disable", "--id", "99")
	wantError(t, e, "no redemption code with id 0", "redeem", "disable", "--id", "0")
	wantError(t, e, "--id is required", "redeem", "disable")
	wantError(t, e, "--limit must be from 1 to 1000", "redeem", "list", "--limit", "1001")
}

// codeID is the id of a code, read through the store.
func codeID(t *testing.T, e Env, code string) int64 {
	t.Helper()
	codes, err := open(t, e).ListRedemptionCodes(context.Background(), store.CodeFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if c.Code == code {
			return c.ID
		}
	}
	t.Fatalf("no code %q", code)
	return 0
}

// TestCommandLineMistakes: every mistake is an error of one line that says
// what to type, before the database is opened.
func TestCommandLineMistakes(t *testing.T) {
	e := testEnv(t)
	opened := false
	openStore := e.OpenStore
	e.OpenStore = func(c *cobra.Command) (store.Store, error) { opened = true; return openStore(c) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "caddy gateway needs a command: one of audit, prices, redeem, secrets, token, usage, user"},
		{[]string{"frob"}, `caddy gateway has no command "frob": type one of audit, prices, redeem, secrets, token, usage, user`},
		{[]string{"user"}, "gateway user needs a command: one of add, budget, disable, enable, list, passwd, plan, quota, reset-link, role, second-factor-reset, set, show, sso-link, sso-unlink"},
		{[]string{"user", "lst"}, `gateway user has no command "lst" (did you mean "list"?)`},
		{[]string{"token", "remove"}, `gateway token has no command "remove": type one of add, budget, delete, disable, enable, list, rename, set`},
		{[]string{"redeem", "use"}, `gateway redeem has no command "use": type one of add, disable, enable, list`},
		{[]string{"usage", "show"}, `gateway usage has no command "show": type one of export`},
		{[]string{"usage"}, "gateway usage needs a command"},
		{[]string{"user", "show", "ann"}, `caddy gateway user show takes flags, not "ann": caddy gateway user show --username <name>`},
		{[]string{"user", "show", "--name", "ann"}, "unknown flag: --name (see 'caddy gateway user show --help')"},
		{[]string{"user", "show"}, "--username is required: caddy gateway user show --username <name>"},
		{[]string{"user", "show", "--username", ""}, "--username is required"},
		{[]string{"user", "add", "--username", "ann", "--password", ""}, "--password is empty"},
		{[]string{"user", "passwd"}, "--username is required"},
		{[]string{"user", "set", "--rpm", "5"}, "--username is required"},
		{[]string{"user", "enable"}, "--username is required"},
		{[]string{"token", "add"}, "--username is required: caddy gateway token add --username <name> [--name <name>]"},
		{[]string{"token", "list"}, "--username is required"},
		{[]string{"token", "set", "--rpm", "5"}, "--id is required: caddy gateway token set --id <token id>"},
		{[]string{"token", "disable"}, "--id is required"},
		{[]string{"token", "delete"}, "--id is required"},
		{[]string{"token", "rename", "--name", "x"}, "--id is required"},
		{[]string{"token", "delete", "--id", "x"}, `invalid argument "x" for "--id" flag`},
		{[]string{"redeem", "add"}, "--quota or --usd is required"},
		{[]string{"redeem", "enable"}, "--id is required"},
	} {
		wantError(t, e, tc.want, tc.args...)
	}
	if opened {
		t.Error("a command with a mistake on its command line opened the database")
	}
}
