package accountapi_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/account"
)

type auditEntry struct {
	Actor  string
	Action string
	Target string
	Before map[string]any
	After  map[string]any
}

// TestAuditLogRecordsAdminActions: each administrator's change is in the
// audit log with who, what and the fields before and after, and never a
// password or a code's text; the listing filters and pages.
func TestAuditLogRecordsAdminActions(t *testing.T) {
	o := newOperatorAPI(t)
	var made struct{ ID int64 }
	o.send(t, "POST", "/api/admin/users", `{"username":"cat","password":"secret-password-1","quota":5}`, &made)
	o.send(t, "PATCH", fmt.Sprintf("/api/admin/users/%d", made.ID), `{"quota_delta":1000,"limits":{"rpm":7}}`, nil)
	o.send(t, "POST", fmt.Sprintf("/api/admin/users/%d/password", made.ID), `{"password":"another-secret-2"}`, nil)
	var codes struct {
		Data []struct {
			ID   int64
			Code string
			Name string
		}
	}
	o.send(t, "POST", "/api/admin/codes", `{"name":"spring-promo","count":3,"quota":500000}`, &codes)
	if len(codes.Data) != 3 || codes.Data[0].Name != "spring-promo" {
		t.Fatalf("codes: %+v", codes)
	}
	o.send(t, "PATCH", fmt.Sprintf("/api/admin/codes/%d", codes.Data[0].ID), `{"status":"disabled"}`, nil)
	o.send(t, "POST", "/api/admin/channels/up1/test", `{}`, nil)
	key, tok, err := account.CreateToken(context.Background(), o.st, o.ann.ID, account.TokenSpec{Name: "ann-key"})
	if err != nil {
		t.Fatal(err)
	}
	o.send(t, "PATCH", fmt.Sprintf("/api/admin/tokens/%d", tok.ID), `{"limits":{"tpm":900}}`, nil)

	var all struct {
		Data       []auditEntry
		NextCursor string `json:"next_cursor"`
	}
	w := o.send(t, "GET", "/api/admin/audit", "", &all)
	for _, secret := range []string{"secret-password-1", "another-secret-2", codes.Data[0].Code, codes.Data[1].Code, key} {
		if strings.Contains(w.Body.String(), secret) {
			t.Fatalf("the audit log holds a secret %q: %s", secret, w.Body)
		}
	}
	var actions []string
	for _, e := range all.Data {
		if e.Actor != "boss" {
			t.Fatalf("actor %q, want boss: %+v", e.Actor, e)
		}
		actions = append(actions, e.Action)
	}
	want := "key.update,channel.test,code.update,code.create,user.password_reset,user.update,user.create"
	if strings.Join(actions, ",") != want {
		t.Fatalf("actions newest first: %v, want %s", actions, want)
	}
	if k := all.Data[0]; k.Target != fmt.Sprintf("key:%d", tok.ID) || k.Before["limits"].(map[string]any)["tpm"] != 0.0 ||
		k.After["limits"].(map[string]any)["tpm"] != 900.0 || k.After["name"] != nil {
		t.Fatalf("the key's change: %+v", k)
	}
	upd := all.Data[5]
	if upd.Target != fmt.Sprintf("user:%d", made.ID) || upd.Before["quota"] != 5.0 || upd.After["quota"] != 1005.0 ||
		upd.After["limits"].(map[string]any)["rpm"] != 7.0 || upd.Before["username"] != nil {
		t.Fatalf("the update's before and after hold what changed only: %+v", upd)
	}
	if batch := all.Data[3]; batch.Target != "batch:spring-promo" || batch.After["count"] != 3.0 {
		t.Fatalf("the batch: %+v", batch)
	}

	list := func(q url.Values) (out struct {
		Data       []auditEntry
		NextCursor string `json:"next_cursor"`
	}) {
		t.Helper()
		o.send(t, "GET", "/api/admin/audit?"+q.Encode(), "", &out)
		return out
	}
	if got := list(url.Values{"action": {"user."}}); len(got.Data) != 3 {
		t.Fatalf("user actions: %+v", got.Data)
	}
	if got := list(url.Values{"actor": {"cli"}}); len(got.Data) != 0 {
		t.Fatalf("the CLI did nothing here: %+v", got.Data)
	}
	first := list(url.Values{"limit": {"4"}})
	rest := list(url.Values{"limit": {"4"}, "before": {first.NextCursor}})
	if len(first.Data) != 4 || first.NextCursor == "" || len(rest.Data) != 3 || rest.NextCursor != "" {
		t.Fatalf("pages: %d (%q), %d (%q)", len(first.Data), first.NextCursor, len(rest.Data), rest.NextCursor)
	}
	for _, bad := range []string{"limit=0", "since=yesterday", "before=x"} {
		if w := o.send(t, "GET", "/api/admin/audit?"+bad, "", nil); w.Code != 400 {
			t.Fatalf("%s: %d", bad, w.Code)
		}
	}
	w = do(o.h, "GET", "/api/admin/audit", "", nil)
	if w.Code != 401 {
		t.Fatalf("without a login: %d", w.Code)
	}
}

// TestCodeBatchesSearchAndExport: codes made as a named batch are listed
// by that name or a part of it, and exported as CSV with their names.
func TestCodeBatchesSearchAndExport(t *testing.T) {
	o := newOperatorAPI(t)
	o.send(t, "POST", "/api/admin/codes", `{"name":"spring-promo","count":2,"quota":1500000}`, nil)
	o.send(t, "POST", "/api/admin/codes", `{"count":1,"quota":7}`, nil)
	var out struct {
		Data []struct{ Name string }
	}
	o.send(t, "GET", "/api/admin/codes?search=SPRING", "", &out)
	if len(out.Data) != 2 || out.Data[0].Name != "spring-promo" {
		t.Fatalf("search: %+v", out)
	}
	o.send(t, "GET", "/api/admin/codes?name=spring", "", &out)
	if len(out.Data) != 0 {
		t.Fatalf("name is exact: %+v", out)
	}
	w := o.send(t, "GET", "/api/admin/codes/export?name=spring-promo", "", nil)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s", w.Code, w.Header())
	}
	recs, err := csv.NewReader(w.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0][1] != "name" || recs[1][1] != "spring-promo" || recs[1][4] != "$1.50" || len(recs[1][2]) < 10 {
		t.Fatalf("csv: %q", recs)
	}
	if w := o.send(t, "POST", "/api/admin/codes", `{"name":"`+strings.Repeat("x", 65)+`","quota":1}`, nil); w.Code != 400 {
		t.Fatalf("a 65-character name: %d %s", w.Code, w.Body)
	}
}

// TestUserSearch: the users' listing keeps those whose name holds the
// search, in any case.
func TestUserSearch(t *testing.T) {
	o := newOperatorAPI(t)
	var out struct {
		Data []struct{ Username string }
	}
	o.send(t, "GET", "/api/admin/users?search=AN", "", &out)
	if len(out.Data) != 1 || out.Data[0].Username != "ann" {
		t.Fatalf("search AN: %+v", out)
	}
}
