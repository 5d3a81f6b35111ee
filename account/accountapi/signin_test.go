package accountapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestRequireSecondFactorAdmins: under require_second_factor admins an
// administrator's password session gets 403 second_factor_required from
// the admin API until a second factor is on, while their own account API
// and their management key work; the next password login of theirs then
// answers a second step, not a session.
func TestRequireSecondFactorAdmins(t *testing.T) {
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := account.CreateUser(context.Background(), st, account.Operator,
		account.NewUser{Username: "ada", Password: "password-ada", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	h := accountapi.New(accountapi.Config{
		Store: st, Keys: keys.NewCache(st, time.Second), Ledger: billing.NewLedger(),
		Gate:                      account.NewGate(st, account.GateConfig{}),
		Sessions:                  &accountapi.Sessions{Logins: account.Sessions{Store: st}},
		RequireSecondFactorAdmins: true,
	})
	w := do(h, "POST", "/api/user/login", `{"username":"ada","password":"password-ada"}`, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	cookie := w.Result().Cookies()[0]
	withCookie := func(r *http.Request) { r.AddCookie(cookie) }
	if w := do(h, "GET", "/api/admin/users", "", withCookie); w.Code != http.StatusForbidden || errorCode(t, w) != "second_factor_required" {
		t.Fatalf("admin API before enrolling: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/user/self", "", withCookie); w.Code != http.StatusOK {
		t.Fatalf("own account before enrolling: %d %s", w.Code, w.Body)
	}
	w = do(h, "POST", "/api/user/tokens", `{"name":"ops","management":true}`, withCookie)
	var tok struct{ Key string }
	if err := json.Unmarshal(w.Body.Bytes(), &tok); err != nil || tok.Key == "" {
		t.Fatalf("management key: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/admin/users", "", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok.Key) }); w.Code != http.StatusOK {
		t.Fatalf("a management key: %d %s", w.Code, w.Body)
	}
	w = do(h, "POST", "/api/user/totp", `{}`, withCookie)
	var enr struct{ Secret string }
	if err := json.Unmarshal(w.Body.Bytes(), &enr); err != nil || enr.Secret == "" {
		t.Fatalf("enrol: %d %s", w.Code, w.Body)
	}
	code, _ := totp.GenerateCode(enr.Secret, time.Now())
	if w := do(h, "POST", "/api/user/totp/confirm", `{"code":"`+code+`"}`, withCookie); w.Code != http.StatusOK {
		t.Fatalf("confirm: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/admin/users", "", withCookie); w.Code != http.StatusOK {
		t.Fatalf("admin API after enrolling: %d %s", w.Code, w.Body)
	}
	w = do(h, "POST", "/api/user/login", `{"username":"ada","password":"password-ada"}`, nil)
	var step struct {
		Required bool   `json:"second_factor_required"`
		Token    string `json:"login_token"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &step); err != nil || !step.Required || step.Token == "" || len(w.Result().Cookies()) != 0 {
		t.Fatalf("the next login: %d %s, cookies %v", w.Code, w.Body, w.Result().Cookies())
	}
}
