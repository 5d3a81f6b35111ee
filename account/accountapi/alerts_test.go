package accountapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestKeyAlertThresholdsAndAlertLists: a user sets thresholds on their own
// key only, within 1..100 %, and lists their own alerts; an administrator
// lists everyone's.
func TestKeyAlertThresholdsAndAlertLists(t *testing.T) {
	h, st := newAPI(t)
	ctx := context.Background()
	if _, err := account.CreateUser(ctx, st, account.Operator,
		account.NewUser{Username: "bob", Password: "password-bob", Role: store.RoleUser}); err != nil {
		t.Fatal(err)
	}
	if _, err := account.CreateUser(ctx, st, account.Operator,
		account.NewUser{Username: "root", Password: "password-root", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	ann, _ := st.UserByName(ctx, "ann")
	bob, _ := st.UserByName(ctx, "bob")
	annKey := &store.Token{UserID: ann.ID, Name: "a", KeyHash: "ha", KeyPrefix: "sk-a"}
	bobKey := &store.Token{UserID: bob.ID, Name: "b", KeyHash: "hb", KeyPrefix: "sk-b"}
	for _, k := range []*store.Token{annKey, bobKey} {
		if err := st.CreateToken(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	login := func(name string) func(*http.Request) {
		w := do(h, "POST", "/api/user/login", `{"username":"`+name+`","password":"password-`+name+`"}`, nil)
		c := w.Result().Cookies()[0]
		return func(r *http.Request) { r.AddCookie(c) }
	}
	asAnn, asRoot := login("ann"), login("root")
	path := func(k *store.Token) string { return "/api/user/tokens/" + itoa(k.ID) + "/alerts" }

	if w := do(h, "PUT", path(annKey), `{"thresholds":[80,50]}`, asAnn); w.Code != http.StatusOK || w.Body.String() != "{\"thresholds\":[50,80]}\n" {
		t.Fatalf("set own: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", path(annKey), "", asAnn); w.Code != http.StatusOK || w.Body.String() != "{\"thresholds\":[50,80]}\n" {
		t.Fatalf("get own: %d %s", w.Code, w.Body)
	}
	if ts, _ := st.KeyAlertThresholds(ctx, annKey.ID); len(ts) != 2 {
		t.Fatalf("stored %v", ts)
	}
	if w := do(h, "PUT", path(bobKey), `{"thresholds":[10]}`, asAnn); w.Code != http.StatusNotFound {
		t.Fatalf("set another's key: %d %s; want 404", w.Code, w.Body)
	}
	for _, bad := range []string{`{"thresholds":[0]}`, `{"thresholds":[150]}`, `{"thresholds":[50,50]}`} {
		if w := do(h, "PUT", path(annKey), bad, asAnn); w.Code != http.StatusBadRequest || errorCode(t, w) != "invalid_thresholds" {
			t.Fatalf("%s: %d %s; want 400 invalid_thresholds", bad, w.Code, w.Body)
		}
	}
	for _, a := range []*store.Alert{
		{ID: "e1", Subject: "user:1", Window: "daily", Period: "daily@2026-11-26", Threshold: 50, UserID: ann.ID, Spent: 5, Limit: 10},
		{ID: "e2", Subject: "user:2", Window: "balance", Period: "balance@10", Threshold: 80, UserID: bob.ID, Spent: 8, Limit: 10},
	} {
		if _, err := st.ClaimAlert(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(w interface{ Bytes() []byte }) []string {
		var l struct{ Data []store.Alert }
		if err := json.Unmarshal(w.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range l.Data {
			out = append(out, a.ID)
		}
		return out
	}
	if w := do(h, "GET", "/api/user/alerts", "", asAnn); w.Code != http.StatusOK || len(ids(w.Body)) != 1 || ids(w.Body)[0] != "e1" {
		t.Fatalf("own alerts: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/admin/alerts", "", asAnn); w.Code != http.StatusForbidden {
		t.Fatalf("a user listing everyone's: %d", w.Code)
	}
	if w := do(h, "GET", "/api/admin/alerts", "", asRoot); w.Code != http.StatusOK || len(ids(w.Body)) != 2 {
		t.Fatalf("admin alerts: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/admin/alerts?user_id="+itoa(bob.ID), "", asRoot); len(ids(w.Body)) != 1 || ids(w.Body)[0] != "e2" {
		t.Fatalf("admin alerts of bob: %s", w.Body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
