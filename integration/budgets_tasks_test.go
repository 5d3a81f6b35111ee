package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// windowSpent is what /api/user/self says a window of the key's user
// holds (settled and in flight), by "<subject>/<window>".
func windowSpent(t *testing.T, gw *gatewaytest.Gateway, key string) map[string]int64 {
	t.Helper()
	resp, body := gw.Do(http.MethodGet, "/api/user/self", key, nil, nil)
	var self struct {
		Budget struct {
			Windows []struct {
				Subject, Window string
				Spent           int64
			}
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &self) != nil {
		t.Fatalf("self: %d %s", resp.StatusCode, body)
	}
	m := map[string]int64{}
	for _, w := range self.Budget.Windows {
		m[w.Subject+"/"+w.Window] = w.Spent
	}
	return m
}

// TestBudgetPlanPaysForTasks: a plan that covers a video model pays for
// its tasks as for any request. The plan's windows count a task's
// reservation while it runs and its real cost once settled, the balance
// is never touched, the usage row names the plan and the windows, and a
// restart keeps what the windows counted. A balance-paid task gives its
// unused reservation back to its user's windows too.
func TestBudgetPlanPaysForTasks(t *testing.T) {
	s := startTasksWith(t, taskOptions{})
	s.cfg.option(block("plan video", "weekly 1.5", "models sora-2")).
		withSite(append([]string{"@account path /api/user/*", block("route @account", "gateway_account")}, tasksSite...)...)
	s.gw.Reload(s.cfg.String(), s.vars)
	// a management key: windowSpent reads /api/user/self with it
	key := s.gw.AddUser("sub", 0, "--management")
	s.gw.CLI("user", "plan", "--username", "sub", "--plan", "video", "--days", "30")
	uid := userID(t, s.gw, "sub")
	weekly := "plan:video/user:" + uid + "/weekly"

	// no duration: 12 s (1.2 USD) reserved, from the plan alone
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"a kite"}`)
	if got := windowSpent(t, s.gw, key)[weekly]; got != 1_200_000 {
		t.Fatalf("the plan's weekly window holds %d while the task runs, want its 1200000 reservation", got)
	}
	if q, used := s.gw.Quota("sub"); q != 0 || used != 0 {
		t.Fatalf("quota %d used %d: the plan pays, not the balance", q, used)
	}
	// the fake made 4 s: 0.4 USD, and 0.8 come back to the plan
	s.openai.Videos.Finish(s.openai.Videos.Last(t).ID)
	waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	rows := s.gw.WaitUsage("sub", 1)
	if r := rows[0]; r.Cost != 400_000 || r.Plan != "video" || !strings.Contains(r.Windows, weekly+"@") {
		t.Fatalf("task row: cost %d plan %q windows %q", r.Cost, r.Plan, r.Windows)
	}
	if got := windowSpent(t, s.gw, key)[weekly]; got != 400_000 {
		t.Fatalf("the weekly window holds %d after the task settled at 400000", got)
	}
	if q, used := s.gw.Quota("sub"); q != 0 || used != 0 {
		t.Fatalf("quota %d used %d after settling", q, used)
	}

	// 1.1 USD left: another 12 s reservation does not fit, and no
	// balance may pay: refused in the task endpoints' envelope
	resp, body := s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(`{"model":"sora-2","prompt":"again"}`), nil)
	if a := decodeTask(t, resp.StatusCode, body); resp.StatusCode != 429 || a.Error == nil || !strings.Contains(a.Error.Message, "plan video") {
		t.Fatalf("a task past the plan's window: %d %s", resp.StatusCode, body)
	}
	// 8 s (0.8 USD) fits, and the answer says what room it leaves
	resp, body = s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(`{"model":"sora-2","prompt":"shorter","duration":8}`), nil)
	sub = decodeTask(t, resp.StatusCode, body)
	if resp.StatusCode != 200 || resp.Header.Get("x-gateway-budget-remaining") != "0.300000 USD" || resp.Header.Get("x-gateway-budget-reset") == "" {
		t.Fatalf("submit within the plan: %d %q %q %s", resp.StatusCode, resp.Header.Get("x-gateway-budget-remaining"), resp.Header.Get("x-gateway-budget-reset"), body)
	}
	if got := windowSpent(t, s.gw, key)[weekly]; got != 1_200_000 {
		t.Fatalf("weekly window %d with an 8 s task running", got)
	}

	// what the window counted is in the store: a restart keeps it, and
	// the task still settles against it
	s.gw.Restart()
	if got := windowSpent(t, s.gw, key)[weekly]; got != 1_200_000 {
		t.Fatalf("weekly window %d after a restart, want 1200000", got)
	}
	s.openai.Videos.Finish(s.openai.Videos.Last(t).ID)
	waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	s.gw.WaitUsage("sub", 3) // the refusal's row, and this task's
	if got := windowSpent(t, s.gw, key)[weekly]; got != 1_200_000 {
		t.Fatalf("weekly window %d after an 8 s task charged 800000", got)
	}

	// a balance-paid task with a daily window of the user's own
	payer := s.gw.AddUser("payer", 5_000_000, "--management")
	s.gw.CLI("user", "budget", "--username", "payer", "--daily", "2")
	daily := "user:" + userID(t, s.gw, "payer") + "/daily"
	sub = submitTask(t, s.gw, payer, `{"model":"sora-2","prompt":"paid"}`)
	if got := windowSpent(t, s.gw, payer)[daily]; got != 1_200_000 {
		t.Fatalf("daily window %d while the task runs", got)
	}
	s.openai.Videos.Finish(s.openai.Videos.Last(t).ID)
	waitTask(t, s.gw, payer, sub.Data.TaskID, "finished")
	rows = s.gw.WaitUsage("payer", 1)
	if got := windowSpent(t, s.gw, payer)[daily]; got != 400_000 || rows[0].Plan != "" || !strings.Contains(rows[0].Windows, daily+"@") {
		t.Fatalf("daily window %d after settling at 400000; row plan %q windows %q", got, rows[0].Plan, rows[0].Windows)
	}
	if q, used := s.gw.Quota("payer"); q != 5_000_000-400_000 || used != 400_000 {
		t.Fatalf("payer quota %d used %d", q, used)
	}
}
