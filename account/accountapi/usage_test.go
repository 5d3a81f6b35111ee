package accountapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// TestUsageModelContains: model_contains pages through the rows of every
// model whose name holds the text in any case, newest first, each row
// once, exactly as one query over those models would; a model no longer
// served still matches by its rows.
func TestUsageModelContains(t *testing.T) {
	h, st := newAPI(t)
	ctx := context.Background()
	ann, err := st.UserByName(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	// rows of three models, interleaved, two to a millisecond now and then
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var logs []*store.UsageLog
	models := []string{"GPT-4o", "gpt-4o-mini", "claude", "old-gpt-3"}
	for i := range 40 {
		logs = append(logs, &store.UsageLog{Key: fmt.Sprint("r", i), UserID: ann.ID, Model: models[i%len(models)],
			CreatedAt: base.Add(time.Duration(i/2) * time.Millisecond), Status: 200})
	}
	if err := st.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	w := do(h, "POST", "/api/user/login", `{"username":"ann","password":"password-ann"}`, nil)
	cookie := w.Result().Cookies()[0]
	page := func(q url.Values) (ids []int64, models []string, next string) {
		t.Helper()
		w := do(h, "GET", "/api/user/usage?"+q.Encode(), "", func(r *http.Request) { r.AddCookie(cookie) })
		var out struct {
			Data []struct {
				ID    int64
				Model string
			}
			NextCursor string `json:"next_cursor"`
		}
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &out) != nil {
			t.Fatalf("usage?%s: %d %s", q.Encode(), w.Code, w.Body)
		}
		for _, d := range out.Data {
			ids, models = append(ids, d.ID), append(models, d.Model)
		}
		return ids, models, out.NextCursor
	}

	var all []int64
	seen := map[string]bool{}
	q := url.Values{"model_contains": {"gPt"}, "limit": {"7"}}
	for {
		ids, got, next := page(q)
		all = append(all, ids...)
		for _, m := range got {
			seen[m] = true
		}
		if next == "" {
			break
		}
		q.Set("after", next)
	}
	if len(all) != 30 || len(seen) != 3 || seen["claude"] {
		t.Fatalf("model_contains=gPt gave %d rows of %v, want 30 of GPT-4o, gpt-4o-mini and old-gpt-3", len(all), seen)
	}
	// newest first, each once: ids were given in time order
	for i := 1; i < len(all); i++ {
		if all[i] >= all[i-1] {
			t.Fatalf("rows out of order or repeated: %v", all)
		}
	}
	if ids, _, next := page(url.Values{"model_contains": {"nothing-like-it"}}); len(ids) != 0 || next != "" {
		t.Fatalf("a text no model holds lists %v", ids)
	}
	w = do(h, "GET", "/api/user/usage?model=claude&model_contains=c", "", func(r *http.Request) { r.AddCookie(cookie) })
	if w.Code != http.StatusBadRequest {
		t.Fatalf("model and model_contains together: %d", w.Code)
	}
}

// TestTokenModelsChecked: a key's model list must name served models, on
// creation and on a change; a list left as it was is not checked again.
func TestTokenModelsChecked(t *testing.T) {
	h, _ := newAPI(t)
	w := do(h, "POST", "/api/user/login", `{"username":"ann","password":"password-ann"}`, nil)
	cookie := w.Result().Cookies()[0]
	send := func(method, path, body string) *httptest.ResponseRecorder {
		return do(h, method, path, body, func(r *http.Request) { r.AddCookie(cookie) })
	}
	if w := send("POST", "/api/user/tokens", `{"name":"x","models":["nope"]}`); w.Code != 400 || errorCode(t, w) != "unknown_model" {
		t.Fatalf("an unknown model: %d %s", w.Code, w.Body)
	}
	w = send("POST", "/api/user/tokens", `{"name":"x","models":["m"]}`)
	var tk struct{ ID int64 }
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &tk) != nil {
		t.Fatalf("a served model: %d %s", w.Code, w.Body)
	}
	path := fmt.Sprintf("/api/user/tokens/%d", tk.ID)
	if w := send("PATCH", path, `{"models":["m","gone"]}`); w.Code != 400 || errorCode(t, w) != "unknown_model" {
		t.Fatalf("a changed list with an unknown model: %d %s", w.Code, w.Body)
	}
	if w := send("PATCH", path, `{"name":"y","models":["m"]}`); w.Code != 200 {
		t.Fatalf("a rename with the list as it was: %d %s", w.Code, w.Body)
	}
}
