package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The console as an operator's day goes: the dashboard, the channels and
// their test button, every user's usage log and a request's detail,
// users searched, limited and their passwords reset, codes searched and
// exported; and every operator's page on a phone.

// operatorConfig is the account gateway with a channel to a fake OpenAI
// upstream and one to an address nobody answers, ejected after one
// failure.
func operatorConfig() *caddyfile {
	return accountConfig("off", 1000, 1000).
		option(block("health", "consecutive_failures 1", "base_ejection 1m")).
		channel("fake", "openai", "{{UP}}", "sk-fake-upstream-0001", "gpt-4o-mini").
		channel("down", "openai", "http://127.0.0.1:9", "sk-down-upstream-0002", "gpt-dead").
		price("gpt-4o-mini", "input 0.15", "output 0.60", "cached_input 0.075").
		price("gpt-dead", "input 1", "output 1")
}

// operatorDay is a gateway after some traffic: ann asked gpt-4o-mini
// twice (cached tokens included), bob asked demo once and gpt-dead once
// (a failure, which ejects channel down).
type operatorDay struct {
	g        *gatewaytest.Gateway
	fake     *gatewaytest.FakeOpenAI
	ann, bob []gatewaytest.UsageRow
}

func startOperatorDay(t *testing.T) *operatorDay {
	t.Helper()
	fake := gatewaytest.NewFakeOpenAI(t, "sk-fake-upstream-0001")
	fake.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CachedTokens, b.CompletionTokens = 1000, 400, 20 })
	g := gatewaytest.Start(t, operatorConfig().String(), gatewaytest.Vars{"UP": fake.URL})
	createUser(g, "ann", 5_000_000, "user")
	createUser(g, "bob", 5_000_000, "user")
	annKey, bobKey := g.AddToken("ann"), g.AddToken("bob")
	for range 2 {
		resp, body := g.Do(http.MethodPost, "/v1/chat/completions", annKey, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("gpt-4o-mini: %d %s", resp.StatusCode, body)
		}
	}
	if st := chatOnce(t, g, bobKey, "hello"); st != 200 {
		t.Fatalf("demo: %d", st)
	}
	if resp, _ := g.Do(http.MethodPost, "/v1/chat/completions", bobKey, []byte(`{"model":"gpt-dead","messages":[{"role":"user","content":"hi"}]}`), nil); resp.StatusCode < 500 {
		t.Fatalf("gpt-dead answered %d", resp.StatusCode)
	}
	return &operatorDay{g: g, fake: fake, ann: g.WaitUsage("ann", 2), bob: g.WaitUsage("bob", 2)}
}

func (d *operatorDay) rows() []gatewaytest.UsageRow {
	return append(append([]gatewaytest.UsageRow{}, d.ann...), d.bob...)
}

// failed is bob's gpt-dead row.
func (d *operatorDay) failed(t *testing.T) gatewaytest.UsageRow {
	for _, r := range d.bob {
		if r.Model == "gpt-dead" {
			return r
		}
	}
	t.Fatalf("no gpt-dead row among %+v", d.bob)
	return gatewaytest.UsageRow{}
}

// adminBrowser is a browser logged in as a fresh administrator.
func adminBrowser(t *testing.T, g *gatewaytest.Gateway, name string) *browserSession {
	t.Helper()
	skipBrowserOnPostgres(t)
	createUser(g, name, 0, "admin")
	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), name),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-"+name+"\r"))
	b.waitFor(`!document.getElementById('nav-admin').hidden`)
	return b
}

// TestConsoleAdminDashboard: the totals, spend in dollars, errors and
// the cache's share; the top tables by model, user, key and channel; the
// chart of one model's requests and of errors; a user is refused.
func TestConsoleAdminDashboard(t *testing.T) {
	d := startOperatorDay(t)
	b := adminBrowser(t, d.g, "boss")
	b.open("/console/dashboard", `!document.getElementById('admin').hidden && document.getElementById('admin').dataset.loading === 'no' && document.getElementById('stat-requests').textContent !== ''`)
	var cost, prompt, cached int64
	for _, r := range d.rows() {
		cost += r.Cost
		prompt += r.PromptTokens
		cached += r.CachedTokens
	}
	if got := b.text("stat-requests"); got != "4" {
		t.Fatalf("requests %q, want 4", got)
	}
	if got := b.text("stat-spend"); got != dollarsText(cost) {
		t.Fatalf("spend %q, want %s", got, dollarsText(cost))
	}
	if got := b.text("stat-errors"); got != "1 (25.0%)" {
		t.Fatalf("errors %q", got)
	}
	if want := fmt.Sprintf("%.1f%%", 100*float64(cached)/float64(prompt)); b.text("stat-cache") != want {
		t.Fatalf("cache share %q, want %s (%d of %d)", b.text("stat-cache"), want, cached, prompt)
	}
	table := func(tab string) []string {
		b.do(chromedp.Click(chromedp.ID("tab-" + tab)))
		return evalJS[[]string](b, `[...document.querySelectorAll('#by-rows tr')].map((tr) => [...tr.children].slice(0, 5).map((td) => td.textContent).join('|'))`)
	}
	if got := table("model"); len(got) != 3 || !strings.HasPrefix(got[0], "gpt-4o-mini|2|") {
		t.Fatalf("by model: %v", got)
	}
	if got := table("user"); len(got) != 2 || !strings.HasPrefix(got[0], "ann|2|") || !strings.HasSuffix(got[1], "|1") {
		t.Fatalf("by user: %v", got)
	}
	// the keys gatewaytest makes are named "default"
	if got := table("key"); len(got) != 2 || !strings.HasPrefix(got[0], "default|2|") || !strings.HasPrefix(got[1], "default|2|") {
		t.Fatalf("by key: %v", got)
	}
	got := table("channel")
	// the failed request's row names no channel: none answered it
	if all := strings.Join(got, "\n"); len(got) != 3 || !strings.Contains(all, "(no channel answered)|1|$0.00|0|1") || !strings.Contains(all, "fake|2|") || !strings.Contains(all, "demo|1|") {
		t.Fatalf("by channel: %v", got)
	}
	b.screenshot("admin-dashboard-desktop")

	// one model's requests over time: today has its two
	b.do(chromedp.Click(chromedp.ID("tab-model")),
		chromedp.Click(chromedp.CSS(`button[aria-label="Chart model gpt-4o-mini"]`)))
	b.waitFor(`document.getElementById('chart-title').textContent === 'requests of model gpt-4o-mini'`)
	if s := b.text("chart-summary"); !strings.HasPrefix(s, "Total 2 requests over 14 days") {
		t.Fatalf("the model's chart: %q", s)
	}
	b.do(chromedp.SetValue(chromedp.ID("dash-metric"), "errors"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('dash-metric').dispatchEvent(new Event('change'))`),
		chromedp.SetValue(chromedp.ID("dash-series"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('dash-series').dispatchEvent(new Event('change'))`))
	if s := b.text("chart-summary"); !strings.HasPrefix(s, "Total 1 errors over 14 days") {
		t.Fatalf("the errors chart: %q", s)
	}
	if n := evalJS[int](b, `[...document.querySelectorAll('#chart rect')].filter((r) => Number(r.getAttribute('height')) > 0).length`); n != 1 {
		t.Fatalf("%d days have error bars, want today's", n)
	}
	if src := b.text("dash-sources"); !strings.Contains(src, "every request of the period") {
		t.Fatalf("the sources say %q", src)
	}

	// a user is refused, in words
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`location.pathname === '/' && !document.getElementById('login-card').hidden`)
	b.logInAs("ann")
	for _, p := range []string{"/console/dashboard", "/console/channels", "/console/usage-log"} {
		b.open(p, `document.getElementById('page-error').textContent !== ''`)
		if evalJS[bool](b, `!document.getElementById('admin').hidden`) {
			t.Fatalf("a user sees %s", p)
		}
	}
}

// TestConsoleAdminChannels: each channel's state from the health data,
// its recent errors, models and prices; the test button sends one token
// through the channel asked for, bills nobody, leaves the channel's
// health as it was, and is logged.
func TestConsoleAdminChannels(t *testing.T) {
	d := startOperatorDay(t)
	b := adminBrowser(t, d.g, "boss")
	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`)
	cell := func(channel string, col int) string {
		return evalJS[string](b, fmt.Sprintf(`document.querySelector('#channels tr[data-channel=%q]').children[%d].innerText`, channel, col))
	}
	if st := cell("down", 2); !strings.HasPrefix(st, "ejected until") {
		t.Fatalf("down's state %q", st)
	}
	if st, e := cell("fake", 2), cell("down", 4); !strings.HasPrefix(st, "in service") || !strings.Contains(st, "2 attempts here, 0 failed") || e != "1" {
		t.Fatalf("fake's state %q, down's ejections %q", st, e)
	}
	if last := cell("down", 5); last == "—" || last == "" {
		t.Fatalf("down's last failure %q", last)
	}
	// bob's request that no channel answered names none in its usage row:
	// down's record keeps its error
	if e := cell("down", 10); !strings.HasPrefix(e, "502 at ") || !strings.Contains(e, "could not be reached") {
		t.Fatalf("down's last error %q", e)
	}
	if rec := cell("fake", 6) + "/" + cell("fake", 7); rec != "2/0" {
		t.Fatalf("fake's recent requests/errors %q", rec)
	}
	if p := cell("fake", 11); !strings.Contains(p, "gpt-4o-mini: $0.15 per 1M input tokens") || !strings.Contains(p, "$0.075 per 1M cached input tokens") {
		t.Fatalf("fake's models and prices %q", p)
	}

	asked := len(d.fake.Requests())
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Test channel fake"]`)))
	b.waitFor(`document.querySelector('.test-result[data-channel="fake"]').textContent.startsWith('OK')`)
	res := evalJS[string](b, `document.querySelector('.test-result[data-channel="fake"]').textContent`)
	if !strings.Contains(res, "HTTP 200") || !strings.Contains(res, "1000 + 20 tokens") {
		t.Fatalf("fake's test says %q", res)
	}
	reqs := d.fake.Requests()
	if len(reqs) != asked+1 {
		t.Fatalf("the test sent %d requests upstream", len(reqs)-asked)
	}
	sent := reqs[len(reqs)-1]
	if sent.Model != "gpt-4o-mini" || (sent.Body["max_completion_tokens"] != 1.0 && sent.Body["max_tokens"] != 1.0) {
		t.Fatalf("the test asked %+v", sent.Body)
	}

	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Test channel down"]`)))
	b.waitFor(`document.querySelector('.test-result[data-channel="down"]').textContent.startsWith('Failed')`)
	if res := evalJS[string](b, `document.querySelector('.test-result[data-channel="down"]').textContent`); !strings.Contains(res, `channel "down" could not be reached`) {
		t.Fatalf("down's test says %q", res)
	}
	b.screenshot("admin-channels-desktop")

	// billed to nobody, health untouched, logged
	time.Sleep(300 * time.Millisecond) // a row would have been written by now
	rows, err := d.g.Store().CountUsage(context.Background())
	if err != nil || rows != 4 {
		t.Fatalf("usage rows after the tests: %d (%v), want the 4 of the day", rows, err)
	}
	b.do(chromedp.Click(chromedp.ID("channels-refresh")))
	b.waitFor(`document.getElementById('channels').dataset.loading === 'no'`)
	if f, e := cell("down", 3), cell("down", 4); f != "0" || e != "1" {
		t.Fatalf("down's failures and ejections after a failed test: %q %q, want 0 and 1 as before", f, e)
	}
	eventually(t, "the test is logged", func() bool { return strings.Contains(d.g.Logs(), `"channel tested"`) })
	if logs := d.g.Logs(); !strings.Contains(logs, `"by":"boss"`) || !strings.Contains(logs, `"channel":"down"`) {
		t.Fatalf("the test's log lines: %s", grepLines(logs, "channel tested"))
	}
}

// grepLines is the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestConsoleAdminUsageLog: every user's rows; filtered by user name, by
// status, by channel, by key and by request id; a request's detail with
// its ids, timing, stream and cost, term by term.
func TestConsoleAdminUsageLog(t *testing.T) {
	d := startOperatorDay(t)
	failed := d.failed(t)
	b := adminBrowser(t, d.g, "boss")
	b.open("/console/usage-log", `document.querySelectorAll('#log tr[data-id]').length === 4 && document.querySelectorAll('#log-channel option').length === 4`)
	filter := func(set string) []string {
		b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('log-form').reset();`+set),
			chromedp.Click(chromedp.ID("log-filter")))
		b.waitFor(`document.getElementById('log').dataset.loading === 'no'`)
		return evalJS[[]string](b, `[...document.querySelectorAll('#log tr')].map((tr) => tr.children.length > 1 ? [1, 3, 4, 5].map((i) => tr.children[i].textContent).join('|') : tr.textContent)`)
	}
	if got := filter(`document.getElementById('log-user').value = 'bob'`); len(got) != 2 || !strings.HasPrefix(got[0], "bob|gpt-dead|—|") || !strings.HasPrefix(got[1], "bob|demo|demo|200") {
		t.Fatalf("bob's rows: %v", got)
	}
	if got := filter(`document.getElementById('log-status').value = 'error'`); len(got) != 1 || got[0] != fmt.Sprintf("bob|gpt-dead|—|%d", failed.Status) {
		t.Fatalf("errors: %v", got)
	}
	if got := filter(`document.getElementById('log-channel').value = 'fake'`); len(got) != 2 || !strings.HasPrefix(got[0], "ann|gpt-4o-mini|fake|200") {
		t.Fatalf("channel fake: %v", got)
	}
	if got := filter(fmt.Sprintf(`document.getElementById('log-key').value = '%d'`, d.ann[0].TokenID)); len(got) != 2 {
		t.Fatalf("ann's key: %v", got)
	}
	if got := filter(`document.getElementById('log-model').value = 'MINI'`); len(got) != 2 {
		t.Fatalf("model MINI: %v", got)
	}
	if got := filter(`document.getElementById('log-user').value = 'nobody'`); b.text("log-error") == "" {
		t.Fatalf("an unknown user name: %v, no error", got)
	}
	if got := filter(`document.getElementById('log-status').value = '418'`); len(got) != 1 || !strings.Contains(got[0], "No requests match") {
		t.Fatalf("status 418: %v", got)
	}
	row := d.ann[1]
	if got := filter(fmt.Sprintf(`document.getElementById('log-request').value = %q`, row.UpstreamRequestID)); len(got) != 1 {
		t.Fatalf("by the upstream's request id %q: %v", row.UpstreamRequestID, got)
	}
	if got := filter(fmt.Sprintf(`document.getElementById('log-request').value = %q`, row.RequestID)); len(got) != 1 {
		t.Fatalf("by request id %q: %v", row.RequestID, got)
	}

	// the detail of ann's request
	b.do(chromedp.Click(chromedp.CSS(`#log button[aria-label^="Detail"]`)))
	b.waitFor(`document.getElementById('detail').open`)
	field := func(name string) string {
		return evalJS[string](b, fmt.Sprintf(`document.querySelector('#detail-list dd[data-field=%q]').textContent`, name))
	}
	if field("Request id") != row.RequestID || field("Upstream request id") != row.UpstreamRequestID || field("Streamed") != "no" ||
		field("Time to first byte") != fmt.Sprintf("%d ms", row.TTFBMS) || field("Error") != "none" {
		t.Fatalf("the detail: %s", evalJS[string](b, `document.getElementById('detail-list').innerText`))
	}
	if got := field("Prompt tokens"); got != "1,000 (400 from cache)" {
		t.Fatalf("prompt tokens %q", got)
	}
	if got := b.text("detail-charged"); got != dollarsText(row.Cost) {
		t.Fatalf("charged %q, want %s", got, dollarsText(row.Cost))
	}
	terms := b.text("detail-terms")
	for _, w := range []string{"600 input tokens at $0.15 per 1M: $0.00009", "400 cached input tokens at $0.075 per 1M: $0.00003", "20 output tokens at $0.60 per 1M: $0.000012"} {
		if !strings.Contains(terms, w) {
			t.Fatalf("the cost terms %q lack %q", terms, w)
		}
	}
	b.screenshot("admin-usage-detail-desktop")
	b.do(chromedp.Click(chromedp.ID("detail-close")))

	// the failed row's detail has its error text
	filter(`document.getElementById('log-status').value = 'error'`)
	b.do(chromedp.Click(chromedp.CSS(`#log button[aria-label^="Detail"]`)))
	b.waitFor(`document.getElementById('detail').open`)
	if got := field("Error"); got != failed.Error {
		t.Fatalf("the failed row's error %q, want %q", got, failed.Error)
	}
}

// TestConsoleAdminUsers: search among the loaded users, rate limits and
// quota edited in dollars, a password reset by an administrator (one the
// gateway makes, shown once), and what an administrator may not edit.
func TestConsoleAdminUsers(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).String(), nil)
	for _, n := range []string{"alice", "alfred", "bruno"} {
		createUser(g, n, 1_000_000, "user")
	}
	createUser(g, "other-admin", 0, "admin")
	alice := newClient(t, g)
	alice.login("alice")
	b := adminBrowser(t, g, "boss")
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 6`)
	visible := func() []string {
		return evalJS[[]string](b, `[...document.querySelectorAll('#users tr')].filter((tr) => !tr.hidden).map((tr) => tr.children[1].textContent)`)
	}
	// the loaded rows are filtered at once, then the gateway's search answers
	shown := `[...document.querySelectorAll('#users tr')].filter((tr) => !tr.hidden).map((tr) => tr.children[1].textContent).join(',')`
	b.do(chromedp.SendKeys(chromedp.ID("user-search"), "AL"))
	b.waitFor(shown + ` === 'alice,alfred'`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('user-search').value = ''; document.getElementById('user-search').dispatchEvent(new Event('input'))`))
	b.waitFor(shown + `.split(',').length >= 6`)
	if n := len(visible()); n < 6 {
		t.Fatalf("an empty search shows %d users", n)
	}
	// an administrator edits users, not other administrators
	if n := evalJS[int](b, `document.querySelectorAll('button[aria-label="Edit other-admin"]').length`); n != 0 {
		t.Fatal("an administrator is offered to edit another administrator")
	}

	id := g.User("alice").ID
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit alice"]`)))
	b.waitFor(`document.getElementById('edit-user').open`)
	b.do(chromedp.SendKeys(chromedp.ID("edit-rpm"), "30"), chromedp.SendKeys(chromedp.ID("edit-parallel"), "2"),
		chromedp.SendKeys(chromedp.ID("edit-quota-delta"), "2.5"))
	b.screenshot("admin-user-edit-desktop")
	b.do(chromedp.Click(chromedp.ID("edit-user-save")))
	b.waitFor(`!document.getElementById('edit-user').open`)
	b.waitFor(fmt.Sprintf(`document.querySelector('#users tr[data-user-id="%d"]').textContent.includes('30 requests/min, 2 at once')`, id))
	u := g.User("alice")
	if u.Quota != 3_500_000 || u.Limits.RPM != 30 || u.Limits.MaxParallel != 2 || u.Limits.TPM != 0 {
		t.Fatalf("alice after the edit: quota %d, limits %+v", u.Quota, u.Limits)
	}
	if row := evalJS[string](b, fmt.Sprintf(`document.querySelector('#users tr[data-user-id="%d"]').textContent`, id)); !strings.Contains(row, "$3.50") {
		t.Fatalf("alice's row %q", row)
	}

	// a password the gateway makes, shown once; alice's session ends
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit alice"]`)))
	b.waitFor(`document.getElementById('edit-user').open`)
	b.do(chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.ID("reset-submit")))
	b.waitFor(`!document.getElementById('reset-made').hidden || document.getElementById('reset-error').textContent !== ''`)
	made := b.text("reset-made-password")
	if len(made) != 20 || !strings.Contains(b.text("reset-feedback"), "logged out everywhere") {
		t.Fatalf("the reset shows %q, %q, %q", made, b.text("reset-feedback"), b.text("reset-error"))
	}
	alice.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).ok(http.MethodPost, "/api/user/login", map[string]string{"username": "alice", "password": made})
	// and one the administrator types
	b.do(chromedp.SendKeys(chromedp.ID("reset-password"), "typed-by-boss"), chromedp.Click(chromedp.ID("reset-submit")))
	b.waitFor(`document.getElementById('reset-made').hidden`)
	newClient(t, g).ok(http.MethodPost, "/api/user/login", map[string]string{"username": "alice", "password": "typed-by-boss"})
	b.do(chromedp.Click(chromedp.ID("edit-user-cancel")))

	// one's own row: quota, no limits, no password reset
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit boss"]`)))
	b.waitFor(`document.getElementById('edit-user').open`)
	if !evalJS[bool](b, `document.getElementById('edit-user-limits').disabled && document.getElementById('reset-form').hidden`) {
		t.Fatal("an administrator may edit their own limits or reset their own password")
	}
}

// TestConsoleAdminCodes: codes searched within the list, who used one
// named, and the listed codes exported as CSV.
func TestConsoleAdminCodes(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).String(), nil)
	codes := makeCodes(t, g, 3, 1_500_000)
	dan := loggedIn(t, g, "dan", 0, "user")
	dan.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[1]})
	b := adminBrowser(t, g, "boss")
	dir := t.TempDir()
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, browser.SetDownloadBehavior,
			browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
		return err
	}))
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#codes tr').length === 3`)
	if got := evalJS[string](b, `document.getElementById('codes').textContent`); !strings.Contains(got, "dan (#") {
		t.Fatalf("the used code does not name dan: %q", got)
	}
	shown := func() int {
		return evalJS[int](b, `[...document.querySelectorAll('#codes tr')].filter((tr) => !tr.hidden).length`)
	}
	b.do(chromedp.SendKeys(chromedp.ID("code-search"), codes[2][3:12]))
	if n := shown(); n != 1 {
		t.Fatalf("searching a part of a code shows %d codes", n)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('code-search').value = 'used'; document.getElementById('code-search').dispatchEvent(new Event('input'))`))
	if n := shown(); n != 1 {
		t.Fatalf("searching 'used' shows %d codes", n)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('code-search').value = 'enabled'; document.getElementById('code-search').dispatchEvent(new Event('input'))`),
		chromedp.Click(chromedp.ID("codes-csv")))
	file := filepath.Join(dir, "redemption-codes.csv")
	recs := downloadedCSV(t, file)
	if len(recs) != 3 || strings.Join(recs[0][:4], ",") != "id,code,worth_usd,status" {
		t.Fatalf("the CSV: %v", recs)
	}
	for _, r := range recs[1:] {
		if r[2] != "1.50" || r[3] != "enabled" || (r[1] != codes[0] && r[1] != codes[2]) {
			t.Fatalf("a CSV row %v", r)
		}
	}
}

// TestConsoleAdminOnPhone: at 390 px no operator's page scrolls sideways,
// with their tables full and a request's detail open.
func TestConsoleAdminOnPhone(t *testing.T) {
	d := startOperatorDay(t)
	makeCodes(t, d.g, 2, 1_000_000)
	b := adminBrowser(t, d.g, "boss")
	b.phone()
	b.open("/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#by-rows tr').length === 3`)
	b.noSideScroll("the dashboard")
	b.screenshot("admin-dashboard-phone")
	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`)
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Test channel down"]`)))
	b.waitFor(`document.querySelector('.test-result[data-channel="down"]').textContent.startsWith('Failed')`)
	b.noSideScroll("the channels page")
	b.screenshot("admin-channels-phone")
	b.open("/console/usage-log", `document.querySelectorAll('#log tr[data-id]').length === 4`)
	b.noSideScroll("the usage log")
	b.do(chromedp.Click(chromedp.CSS(`#log button[aria-label^="Detail"]`)))
	b.waitFor(`document.getElementById('detail').open`)
	b.noSideScroll("a request's detail")
	b.screenshot("admin-usage-detail-phone")
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#codes tr').length === 2`)
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit ann"]`)))
	b.waitFor(`document.getElementById('edit-user').open`)
	b.noSideScroll("the user dialog")
	b.screenshot("admin-user-edit-phone")
	// at 1280 px, with the same rows, no table is wider than its card
	b.desktop()
	for _, p := range []struct{ path, ready string }{
		{"/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#by-rows tr').length === 3`},
		{"/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`},
		{"/console/usage-log", `document.querySelectorAll('#log tr[data-id]').length === 4`},
		{"/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#codes tr').length === 2`},
		{"/console/audit", `document.getElementById('audit').dataset.loading === 'no'`},
		{fmt.Sprintf("/console/user?id=%d", d.g.User("bob").ID), `!document.getElementById('admin').hidden && document.querySelectorAll('#keys tr[data-token-id]').length === 1`},
	} {
		b.open(p.path, p.ready)
		b.tablesFit(p.path)
	}
	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`)
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Test channel down"]`)))
	b.waitFor(`document.querySelector('.test-result[data-channel="down"]').textContent.startsWith('Failed')`)
	b.tablesFit("the channels page with a test's result")
	b.screenshot("admin-channels-desktop")
}

// TestConsoleChannelFailingBeforeEjection: a channel that never answers,
// short of its ejection (three failures in a row here), shows "failing"
// with its attempts counted, on the page and in the admin API, although
// its requests' usage rows name no channel (none answered); a channel
// that answers shows "in service" with its attempts.
func TestConsoleChannelFailingBeforeEjection(t *testing.T) {
	fake := gatewaytest.NewFakeOpenAI(t, "sk-fake-upstream-0001")
	cfg := accountConfig("off", 1000, 1000).
		option(block("health", "consecutive_failures 3", "base_ejection 1m")).
		channel("fake", "openai", "{{UP}}", "sk-fake-upstream-0001", "gpt-4o-mini").
		channel("down", "openai", "http://127.0.0.1:9", "sk-down-upstream-0002", "gpt-dead").
		price("gpt-4o-mini", "input 0.15", "output 0.60").
		price("gpt-dead", "input 1", "output 1")
	g := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": fake.URL})
	createUser(g, "bob", 5_000_000, "user")
	key := g.AddToken("bob")
	ask := func(model string) int {
		resp, _ := g.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`), nil)
		return resp.StatusCode
	}
	if s := ask("gpt-4o-mini"); s != 200 {
		t.Fatalf("gpt-4o-mini: %d", s)
	}
	for range 2 {
		if s := ask("gpt-dead"); s < 500 {
			t.Fatalf("gpt-dead answered %d", s)
		}
	}
	g.WaitUsage("bob", 3)

	b := adminBrowser(t, g, "boss")
	var channels struct {
		Data []struct {
			Name    string
			State   string
			Ejected bool
			Failing int
			A       int64 `json:"attempts"`
			F       int64 `json:"failed_attempts"`
		}
	}
	admin := loggedIn(t, g, "ops", 0, "admin")
	admin.ok(http.MethodGet, "/api/admin/channels", nil).decode(t, &channels)
	got := map[string]string{}
	for _, c := range channels.Data {
		got[c.Name] = fmt.Sprintf("%s ejected=%v failing=%d attempts=%d failed=%d", c.State, c.Ejected, c.Failing, c.A, c.F)
	}
	if got["down"] != "failing ejected=false failing=2 attempts=2 failed=2" || got["fake"] != "in_service ejected=false failing=0 attempts=1 failed=0" {
		t.Fatalf("the admin API's channels: %v", got)
	}

	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`)
	cell := func(channel string) string {
		return evalJS[string](b, fmt.Sprintf(`document.querySelector('#channels tr[data-channel=%q]').children[2].innerText`, channel))
	}
	if st := cell("down"); !strings.HasPrefix(st, "failing: 2 failures since its last success") || !strings.Contains(st, "2 attempts here, 2 failed") {
		t.Fatalf("down's state %q", st)
	}
	if st := cell("fake"); !strings.HasPrefix(st, "in service") || !strings.Contains(st, "1 attempts here, 0 failed") {
		t.Fatalf("fake's state %q", st)
	}
	// the third failure in a row ejects it
	if s := ask("gpt-dead"); s < 500 {
		t.Fatalf("gpt-dead answered %d", s)
	}
	b.do(chromedp.Click(chromedp.ID("channels-refresh")))
	b.waitFor(`document.getElementById('channels').dataset.loading === 'no'`)
	if st := cell("down"); !strings.HasPrefix(st, "ejected until") || !strings.Contains(st, "3 attempts here, 3 failed") {
		t.Fatalf("down's state after its third failure %q", st)
	}
}
