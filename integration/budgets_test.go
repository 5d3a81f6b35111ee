package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Spending windows (docs/budgets.md): a key's, a user's, a group's and a
// plan's windows refuse what would cross them, in the caller's dialect,
// with the window, its reset and Retry-After; plans pay instead of the
// balance; model groups limit keys and plans.

// budgetConfig prices coder-1 so that the fake's 10 prompt and 20
// completion tokens cost 10 + 200 = 210 units, and a request with
// max_tokens 20 reserves 200 units of output plus its prompt's estimate:
// a little more than it costs, so a window is never overrun.
func budgetConfig(extra ...string) *caddyfile {
	c := gatewayConfig().
		withSite(
			"@account path /api/user/* /api/admin/*",
			block("route @account", "gateway_account"),
			"@console path / /console /console/*",
			block("route @console", "gateway_console"),
			"@models path /v1/* /v1beta/*",
			block("route @models", "gateway_auth", "gateway_relay")).
		option("token_cache_ttl 1s").
		option("budget_timezone Asia/Shanghai").
		option("models_group coding coder-*").
		channel("up", "openai", "{{UP}}", "sk-up", "coder-1 other-1").
		price("coder-1", "input 1", "output 10").
		price("other-1", "input 1", "output 10")
	for _, e := range extra {
		c = c.option(e)
	}
	return c
}

func startBudgets(t *testing.T, extra ...string) (*gatewaytest.Gateway, *gatewaytest.FakeOpenAI) {
	t.Helper()
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gw := gatewaytest.Start(t, budgetConfig(extra...).String(), gatewaytest.Vars{"UP": up.URL})
	return gw, up
}

// streamOnce sends one streamed chat completion with the OpenAI SDK and
// reads it to the end; err is the SDK's (an *openai.Error for a refusal).
func streamOnce(ctx context.Context, gw *gatewaytest.Gateway, key, model string) error {
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     model,
		MaxTokens: openai.Int(20),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	for s.Next() {
	}
	return s.Err()
}

// drive sends waves of concurrent streams until one wave is wholly
// refused, and returns how many were answered and the last refusal.
func drive(t *testing.T, gw *gatewaytest.Gateway, key, model string) (answered int, refused *openai.Error) {
	t.Helper()
	for wave := 0; wave < 20; wave++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		ok := 0
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := streamOnce(context.Background(), gw, key, model)
				mu.Lock()
				defer mu.Unlock()
				var e *openai.Error
				switch {
				case err == nil:
					ok++
				case errors.As(err, &e):
					refused = e
				default:
					t.Errorf("stream: %v", err)
				}
			}()
		}
		wg.Wait()
		answered += ok
		if ok == 0 {
			return answered, refused
		}
	}
	t.Fatal("twenty waves were not refused")
	return
}

// spent sums the cost of a user's rows and checks each answered row
// counted against a window of subject.
func spent(t *testing.T, rows []gatewaytest.UsageRow, subject string) int64 {
	t.Helper()
	var sum int64
	for _, r := range rows {
		if r.Status != 200 {
			if r.Cost != 0 || r.Windows != "" {
				t.Fatalf("a refused row cost %d, windows %q", r.Cost, r.Windows)
			}
			continue
		}
		sum += r.Cost
		if !strings.Contains(r.Windows, subject+"/") {
			t.Fatalf("row windows %q, want some of %s", r.Windows, subject)
		}
	}
	return sum
}

func userID(t *testing.T, gw *gatewaytest.Gateway, name string) string {
	return strconv.FormatInt(gw.User(name).ID, 10)
}

// TestBudgetWindowsUnderConcurrentStreams drives a user to the limit of
// each window with concurrent streams (the official SDK): no window is
// overrun (each reservation covers its request, so none can be), the
// refusal is a 429 that names the window and its reset, with Retry-After
// until then (in the budgets' zone) or, for lifetime, none and
// x-should-retry: false; every answered row carries its window ids.
func TestBudgetWindowsUnderConcurrentStreams(t *testing.T) {
	gw, up := startBudgets(t)
	up.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 20 * time.Millisecond })
	sh, _ := time.LoadLocation("Asia/Shanghai")
	const limit = 2000 // 0.002 USD: about nine requests
	for _, w := range []string{"5h", "daily", "weekly", "monthly", "lifetime"} {
		t.Run(w, func(t *testing.T) {
			name := "win-" + w
			key := gw.AddUser(name, 100_000_000)
			gw.CLI("user", "budget", "--username", name, "--"+w, "0.002")
			before := time.Now()
			answered, refused := drive(t, gw, key, "coder-1")
			if answered < limit/240 || refused == nil {
				t.Fatalf("%d answered before the refusal %v", answered, refused)
			}
			if refused.StatusCode != 429 || refused.Code != "budget_exceeded" || !strings.Contains(refused.Message, "your account") {
				t.Fatalf("refusal %d %q: %s", refused.StatusCode, refused.Code, refused.Message)
			}
			var got int64
			eventually(t, "every answered row committed", func() bool {
				got = spent(t, gw.WaitUsage(name, answered), "user:"+userID(t, gw, name))
				return got == int64(answered)*210
			})
			if got > limit {
				t.Fatalf("%d answered spent %d of a %d window", answered, got, limit)
			}
			h := refused.Response.Header
			if w == "lifetime" {
				if h.Get("Retry-After") != "" || h.Get("x-should-retry") != "false" || !strings.Contains(refused.Message, "lifetime budget") {
					t.Fatalf("lifetime: Retry-After %q, x-should-retry %q: %s", h.Get("Retry-After"), h.Get("x-should-retry"), refused.Message)
				}
				return
			}
			now := time.Now().In(sh)
			y, m, d := now.Date()
			reset := map[string]time.Time{
				"daily":   time.Date(y, m, d+1, 0, 0, 0, 0, sh),
				"weekly":  time.Date(y, m, d-(int(now.Weekday())+6)%7+7, 0, 0, 0, 0, sh),
				"monthly": time.Date(y, m+1, 1, 0, 0, 0, 0, sh),
				// the first answered request's 5-minute bucket, plus 5h
				"5h": before.Truncate(5 * time.Minute).Add(5 * time.Hour),
			}[w]
			secs, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
			if err != nil || h.Get("x-should-retry") == "false" {
				t.Fatalf("Retry-After %q, x-should-retry %q", h.Get("Retry-After"), h.Get("x-should-retry"))
			}
			if got := time.Now().Add(time.Duration(secs) * time.Second); got.Before(reset.Add(-time.Minute)) || got.After(reset.Add(time.Minute)) {
				t.Fatalf("Retry-After %ds points at %s, want about %s", secs, got, reset)
			}
			if !strings.Contains(refused.Message, reset.UTC().Format(time.RFC3339)) {
				t.Fatalf("message does not name the reset %s: %s", reset.UTC().Format(time.RFC3339), refused.Message)
			}
		})
	}
}

// TestBudgetKeyWindowInEachDialect: a key's own window refuses in OpenAI's,
// Anthropic's and Gemini's shapes alike; an answered request carries the tightest
// window's room and reset in x-gateway-budget-*; /api/user/self lists the
// windows; the CSV export carries the rows' window ids.
func TestBudgetKeyWindowInEachDialect(t *testing.T) {
	gw, _ := startBudgets(t)
	key := gw.AddUser("keyed", 100_000_000, "--management") // it reads /api/user/self too
	toks, err := gw.Store().ListTokens(context.Background(), gw.User("keyed").ID)
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokens %v, %v", toks, err)
	}
	kid := strconv.FormatInt(toks[0].ID, 10)
	gw.CLI("token", "budget", "--id", kid, "--daily", "0.0005") // 500 units: two requests

	resp, body := gw.Do("POST", "/v1/chat/completions", key, []byte(`{"model":"coder-1","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	remaining, reset := resp.Header.Get("x-gateway-budget-remaining"), resp.Header.Get("x-gateway-budget-reset")
	if !strings.HasPrefix(remaining, "0.000") || !strings.HasSuffix(remaining, " USD") {
		t.Fatalf("x-gateway-budget-remaining %q", remaining)
	}
	if r, err := time.Parse(time.RFC3339, reset); err != nil || time.Until(r) > 24*time.Hour || r.Before(time.Now()) {
		t.Fatalf("x-gateway-budget-reset %q", reset)
	}
	if err := streamOnce(context.Background(), gw, key, "coder-1"); err != nil {
		t.Fatal(err)
	}
	e := apiError(t, streamOnce(context.Background(), gw, key, "coder-1"), 429, "budget_exceeded")
	if !strings.Contains(e.Message, "daily budget of this API key") || e.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("openai refusal: %s %v", e.Message, e.Response.Header)
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "coder-1", MaxTokens: 20,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("anthropic refusal: %v", err)
	}
	var env struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if json.Unmarshal([]byte(ae.RawJSON()), &env) != nil || env.Type != "error" || env.Error.Type != "rate_limit_error" ||
		!strings.Contains(env.Error.Message, "daily budget of this API key") {
		t.Fatalf("anthropic body: %s", ae.RawJSON())
	}

	// and Gemini's
	resp, body = gw.Do("POST", "/v1beta/models/coder-1:generateContent", "", []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":20}}`),
		http.Header{"x-goog-api-key": {key}})
	var gem struct {
		Error struct {
			Code            int
			Message, Status string
		}
	}
	if resp.StatusCode != 429 || json.Unmarshal(body, &gem) != nil || gem.Error.Code != 429 || !strings.Contains(gem.Error.Message, "daily budget of this API key") ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("gemini refusal: %d %s", resp.StatusCode, body)
	}

	resp, body = gw.Do("GET", "/api/user/self", key, nil, nil)
	var self struct {
		Budget struct {
			Windows []struct {
				Subject, Window string
				Limit, Spent    int64
				ResetAt         *time.Time `json:"reset_at"`
			}
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &self) != nil || len(self.Budget.Windows) != 1 {
		t.Fatalf("self: %d %s", resp.StatusCode, body)
	}
	if w := self.Budget.Windows[0]; w.Subject != "key:"+kid || w.Window != "daily" || w.Limit != 500 || w.Spent != 420 || w.ResetAt == nil {
		t.Fatalf("self window %+v", w)
	}

	gw.WaitUsage("keyed", 4)
	csv := gw.CLI("usage", "export", "--format", "csv")
	if !strings.Contains(strings.SplitN(csv, "\n", 2)[0], ",windows,plan") || strings.Count(csv, "key:"+kid+"/daily@") != 2 {
		t.Fatalf("export:\n%s", csv)
	}
}

// TestBudgetPlans: a plan pays for its models (the balance, here empty,
// is not charged), its rolling window refuses naming the plan, a model
// outside it is refused, a group's plan and window apply to its members,
// and with "then balance" the balance pays once the plan is full.
func TestBudgetPlans(t *testing.T) {
	// the builder names an option by its first word: both plans are one
	gw, _ := startBudgets(t,
		block("plan pro", "window 5h 0.0005", "models group coding")+"\n"+
			block("plan team", "daily 0.0003", "models group coding", "then balance"),
		block("budget_group staff", "plan team", "weekly 0.001"))
	key := gw.AddUser("sub", 0)
	gw.CLI("user", "plan", "--username", "sub", "--plan", "pro", "--days", "30")
	// names the Caddyfile does not define are refused, not stored
	for _, args := range [][]string{
		{"user", "plan", "--username", "sub", "--plan", "gold"},
		{"user", "plan", "--username", "sub", "--group", "nobody"},
		{"redeem", "add", "--plan", "gold", "--days", "30"},
	} {
		_, errOut, err := gw.TryCLI(args...)
		if err == nil || !strings.Contains(errOut, "is configured in the gateway's Caddyfile") {
			t.Fatalf("%v: %v %s", args, err, errOut)
		}
	}
	for i := range 2 {
		if err := streamOnce(context.Background(), gw, key, "coder-1"); err != nil {
			t.Fatalf("request %d on the plan: %v", i, err)
		}
	}
	e := apiError(t, streamOnce(context.Background(), gw, key, "coder-1"), 429, "budget_exceeded")
	if !strings.Contains(e.Message, "rolling 5-hour budget of your plan pro") {
		t.Fatalf("plan refusal: %s", e.Message)
	}
	apiError(t, streamOnce(context.Background(), gw, key, "other-1"), 403, "model_not_in_plan")
	rows := gw.WaitUsage("sub", 4)
	if q, used := gw.Quota("sub"); q != 0 || used != 0 || rows[0].Plan != "pro" || rows[0].Cost != 210 {
		t.Fatalf("quota %d used %d; row %+v", q, used, rows[0])
	}

	// a plan bought with a code: a user without balance redeems it with
	// their key and is on the plan at once, for 30 days
	code := strings.TrimSpace(gw.CLI("redeem", "add", "--plan", "pro", "--days", "30"))
	buyer := gw.AddUser("buyer", 0, "--management") // it redeems the code too
	if err := streamOnce(context.Background(), gw, buyer, "coder-1"); err == nil {
		t.Fatal("a user without balance or plan was served")
	}
	if resp, body := gw.Do("POST", "/api/user/topup", buyer, []byte(`{"key":"`+code+`"}`), nil); resp.StatusCode != 200 {
		t.Fatalf("redeem the plan code: %d %s", resp.StatusCode, body)
	}
	if err := streamOnce(context.Background(), gw, buyer, "coder-1"); err != nil {
		t.Fatalf("on the redeemed plan: %v", err)
	}
	resp, body := gw.Do("GET", "/api/user/self", buyer, nil, nil)
	var self struct {
		Budget struct {
			Plan      string
			PlanUntil string `json:"plan_until"`
		}
	}
	if json.Unmarshal(body, &self) != nil || self.Budget.Plan != "pro" {
		t.Fatalf("self after the code: %d %s", resp.StatusCode, body)
	}
	if until, err := time.Parse(time.RFC3339, self.Budget.PlanUntil); err != nil || until.Sub(time.Now().AddDate(0, 0, 30)).Abs() > time.Minute {
		t.Fatalf("plan until %q", self.Budget.PlanUntil)
	}

	// a staff member: the team plan pays one request, then the balance
	// pays within the group's weekly window
	mate := gw.AddUser("mate", 1_000_000)
	gw.CLI("user", "plan", "--username", "mate", "--group", "staff")
	for i := range 4 {
		if err := streamOnce(context.Background(), gw, mate, "coder-1"); err != nil {
			t.Fatalf("staff request %d: %v", i, err)
		}
	}
	e = apiError(t, streamOnce(context.Background(), gw, mate, "coder-1"), 429, "budget_exceeded")
	if !strings.Contains(e.Message, "weekly budget of your group staff") {
		t.Fatalf("group refusal: %s", e.Message)
	}
	rows = gw.WaitUsage("mate", 5)
	if q, _ := gw.Quota("mate"); q != 1_000_000-3*210 || rows[0].Plan != "team" || rows[1].Plan != "" {
		t.Fatalf("quota %d; rows %+v", q, rows[:2])
	}
}

// TestBudgetConfigErrors: a plan naming an undefined model group, a group
// naming an undefined plan, an unknown zone or window stop the load.
func TestBudgetConfigErrors(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gw := gatewaytest.Start(t, budgetConfig().String(), gatewaytest.Vars{"UP": up.URL})
	for _, bad := range []struct{ opt, says string }{
		{block("plan p", "models group nope"), "unknown model group"},
		{block("budget_group g", "plan nope"), "unknown plan"},
		{"budget_timezone Mars/Olympus", "budget_timezone"},
		{block("plan p", "hourly 1"), "unrecognized or malformed line"},
	} {
		out, err := gw.TryReload(budgetConfig(bad.opt).String(), gatewaytest.Vars{"UP": up.URL})
		if err == nil || !strings.Contains(out, bad.says) {
			t.Errorf("%q: %v, %s", bad.opt, err, out)
		}
	}
	gw.Reload(budgetConfig().String(), gatewaytest.Vars{"UP": up.URL}) // the CLI reads the file too
	if resp, _ := gw.Do("GET", "/v1/models", gw.AddUser("still", 0), nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the gateway stopped serving: %d", resp.StatusCode)
	}
}

// TestBudgetWindowAcrossInstances: three instances on one PostgreSQL
// database share a user's daily window. Each admits in memory within room
// it claimed of the window from the database, so under concurrent streams
// on all three the window holds in sum, exactly as on one instance (each
// reservation covers its request); every instance then refuses, naming
// the window, and every row counted against it.
func TestBudgetWindowAcrossInstances(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	up.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 20 * time.Millisecond })
	gws := gatewaytest.StartInstances(t, instances, budgetConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gws[0].AddUser("shared", 100_000_000)
	gws[0].CLI("user", "budget", "--username", "shared", "--daily", "0.002")
	const limit = 2000

	var wg sync.WaitGroup
	for _, gw := range gws {
		wg.Add(1)
		go func() { defer wg.Done(); drive(t, gw, key, "coder-1") }()
	}
	wg.Wait()
	start := time.Now()
	for i, gw := range gws {
		within(t, 5*time.Second-time.Since(start), "instance "+strconv.Itoa(i)+" refusing", func() bool {
			err := streamOnce(context.Background(), gw, key, "coder-1")
			var e *openai.Error
			return errors.As(err, &e) && e.StatusCode == 429 && strings.Contains(e.Message, "daily budget of your account")
		})
	}
	var got int64
	rows := gws[0].WaitUsage("shared", 1)
	eventually(t, "the rows committed", func() bool {
		rows = gws[0].WaitUsage("shared", len(rows))
		answered := 0
		for _, r := range rows {
			if r.Status == 200 {
				answered++
			}
		}
		got = spent(t, rows, "user:"+userID(t, gws[0], "shared"))
		return got == int64(answered)*210
	})
	if got > limit {
		t.Fatalf("three instances spent %d of a %d window", got, limit)
	}
	t.Logf("three instances spent %d of a %d window", got, limit)
}

// TestBudgetConsoleShowsWindows: the console's balance card lists the
// user's plan and each window: whose, which, spent of limit, its reset.
func TestBudgetConsoleShowsWindows(t *testing.T) {
	gw, _ := startBudgets(t, block("plan pro", "weekly 1", "models group coding"))
	key := gw.AddUser("cw", 0)
	gw.CLI("user", "plan", "--username", "cw", "--plan", "pro", "--days", "7")
	gw.CLI("user", "budget", "--username", "cw", "--daily", "5")
	if err := streamOnce(context.Background(), gw, key, "coder-1"); err != nil {
		t.Fatal(err)
	}
	gw.WaitUsage("cw", 1)
	b := startBrowser(t, gw)
	b.logInAs("cw")
	b.waitFor(`document.querySelectorAll('#budget-table tbody tr').length === 2`)
	if plan := b.text("budget-plan"); !strings.HasPrefix(plan, "Plan: pro until ") {
		t.Fatalf("plan line %q", plan)
	}
	rows := evalJS[[]string](b, `[...document.querySelectorAll('#budget-table tbody tr')].map((r) => r.textContent)`)
	if !strings.HasPrefix(rows[0], "Your account · daily$0.00021") || !strings.Contains(rows[0], "/ $5") ||
		!strings.HasPrefix(rows[1], "Plan pro · weekly$0.00021") || !strings.Contains(rows[1], "/ $1") {
		t.Fatalf("windows %q", rows)
	}
	if errs := b.pageErrors(); errs != "" {
		t.Fatalf("page errors: %s", errs)
	}
}

// TestBudgetModelGroupsLimitKeys: a key limited to group:coding may use
// the group's models only, and /v1/models lists just those; the account
// API takes a defined group in a key's models and refuses an undefined one.
func TestBudgetModelGroupsLimitKeys(t *testing.T) {
	gw, _ := startBudgets(t)
	key := gw.AddUser("grouped", 100_000_000, "--models", "group:coding", "--management")
	if err := streamOnce(context.Background(), gw, key, "coder-1"); err != nil {
		t.Fatal(err)
	}
	e := apiError(t, streamOnce(context.Background(), gw, key, "other-1"), 403, "model_not_allowed")
	if !strings.Contains(e.Message, "group:coding") {
		t.Fatalf("403: %s", e.Message)
	}
	resp, body := gw.Do("GET", "/v1/models", key, nil, nil)
	var list struct{ Data []struct{ ID string } }
	if json.Unmarshal(body, &list) != nil || len(list.Data) != 1 || list.Data[0].ID != "coder-1" {
		t.Fatalf("models: %d %s", resp.StatusCode, body)
	}
	resp, body = gw.Do("POST", "/api/user/tokens", key, []byte(`{"name":"g","models":["group:coding"]}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("a key limited to a group: %d %s", resp.StatusCode, body)
	}
	resp, body = gw.Do("POST", "/api/user/tokens", key, []byte(`{"name":"g","models":["group:nope"]}`), nil)
	if e, ok := errorBody(body); resp.StatusCode != 400 || !ok || e.Code != "unknown_model" {
		t.Fatalf("an undefined group: %d %s", resp.StatusCode, body)
	}
}

// TestBudgetChangesAudited: a user's and a key's windows and a user's
// plan and group, changed through the admin API (as the console does) and
// with the CLI, each leave an audit row naming who changed what, with the
// fields before and after.
func TestBudgetChangesAudited(t *testing.T) {
	gw, _ := startBudgets(t, block("plan pro", "window 5h 0.0005", "models group coding"),
		block("budget_group staff", "weekly 0.001"))
	admin := loggedIn(t, gw, "boss", 0, "admin")
	gw.AddUser("sub", 0)
	sub := gw.User("sub")
	tokens, err := gw.Store().ListTokens(t.Context(), sub.ID)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("sub's keys: %v %v", tokens, err)
	}
	user, key := fmt.Sprintf("user:%d", sub.ID), fmt.Sprintf("key:%d", tokens[0].ID)

	admin.ok(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", sub.ID), map[string]any{"windows": map[string]string{"daily": "5"}})
	admin.ok(http.MethodPut, fmt.Sprintf("/api/admin/tokens/%d/budget", tokens[0].ID), map[string]any{"windows": map[string]string{"monthly": "30.5"}})
	admin.ok(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/plan", sub.ID), map[string]any{"plan": "pro", "until": "2030-01-01T00:00:00Z", "group": "staff"})
	gw.CLI("user", "budget", "--username", "sub", "--daily", "7")
	gw.CLI("token", "budget", "--id", fmt.Sprint(tokens[0].ID), "--monthly", "0")
	gw.CLI("user", "plan", "--username", "sub", "--plan", "")

	var page struct {
		Data []struct {
			Actor         string
			Action        string
			Target        string
			Before, After json.RawMessage
		}
	}
	admin.ok(http.MethodGet, "/api/admin/audit?limit=100", nil).decode(t, &page)
	var got []string
	for _, e := range page.Data {
		if strings.HasSuffix(e.Action, ".budget") || e.Action == "user.plan" {
			got = append(got, fmt.Sprintf("%s %s %s %s -> %s", e.Actor, e.Action, e.Target, e.Before, e.After))
		}
	}
	slices.Reverse(got) // oldest first
	want := []string{
		`boss user.budget ` + user + ` {"daily":"0"} -> {"daily":"5"}`,
		`boss key.budget ` + key + ` {"monthly":"0"} -> {"monthly":"30.5"}`,
		`boss user.plan ` + user + ` {"group":"","plan":"","plan_until":null} -> {"group":"staff","plan":"pro","plan_until":"2030-01-01T00:00:00Z"}`,
		`cli user.budget ` + user + ` {"daily":"5"} -> {"daily":"7"}`,
		`cli key.budget ` + key + ` {"monthly":"30.5"} -> {"monthly":"0"}`,
		`cli user.plan ` + user + ` {"plan":"pro","plan_until":"2030-01-01T00:00:00Z"} -> {"plan":"","plan_until":null}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the audit log's budget and plan rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
