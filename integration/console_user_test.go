package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The console as a user's day goes: what models cost, keys picked from
// them and edited, the password, the usage log with its errors and
// filter, redeeming and signing up; and every page on a phone.

// dollarsText is how the console writes units: whole cents always, the
// sub-cent digits when there are any.
func dollarsText(units int64) string {
	frac := strings.TrimRight(fmt.Sprintf("%06d", units%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("$%d.%s", units/1_000_000, frac)
}

// logInAs logs the browser in on the home page.
func (b *browserSession) logInAs(name string) {
	b.t.Helper()
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), name),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-"+name+"\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('quota').textContent !== ''`)
}

// TestUserModelsAPI: /api/user/models gives each model's price in units
// and, to a key limited to some models, only those; a key's model list
// naming a model that is not served is refused with a 400 that lists
// what is.
func TestUserModelsAPI(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	c := loggedIn(t, g, "mia", 5_000_000, "user")

	var models struct {
		Data []struct {
			ID    string
			Chat  bool
			Price map[string]any
		}
	}
	c.ok(http.MethodGet, "/api/user/models", nil).decode(t, &models)
	prices := map[string]map[string]any{}
	for _, m := range models.Data {
		prices[m.ID] = m.Price
	}
	if len(models.Data) != 9 {
		t.Fatalf("models listed: %+v", models.Data)
	}
	if p := prices["gpt-4o-mini"]; p["input"] != 150000.0 || p["output"] != 600000.0 {
		t.Fatalf("gpt-4o-mini priced %v, want input 150000 and output 600000 units per million", p)
	}
	if p := prices["MiniMax-Hailuo-02"]; p["video_second"] != 82000.0 || p["max_seconds"] != 6.0 {
		t.Fatalf("the video model priced %v", p)
	}
	if imgs, _ := prices["dall-e-3"]["images"].([]any); len(imgs) != 1 || imgs[0].(map[string]any)["price"] != 40000.0 {
		t.Fatalf("dall-e-3 priced %v", prices["dall-e-3"])
	}

	// a (management) key limited to demo sees demo alone
	var limited apiToken
	c.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "only-demo", "models": []string{"demo"}, "management": true}).decode(t, &limited)
	bearer := newClient(t, g)
	bearer.bearer = limited.Key
	bearer.ok(http.MethodGet, "/api/user/models", nil).decode(t, &models)
	if len(models.Data) != 1 || models.Data[0].ID != "demo" {
		t.Fatalf("a key limited to demo lists %+v", models.Data)
	}

	msg := c.do(http.MethodPost, "/api/user/tokens", map[string]any{"name": "typo", "models": []string{"gpt-4o-mnii"}}).apiErr(t, 400, "unknown_model")
	if !strings.Contains(msg, `"gpt-4o-mnii"`) || !strings.Contains(msg, "gpt-4o-mini") {
		t.Fatalf("the refusal says %q", msg)
	}
	path := fmt.Sprintf("/api/user/tokens/%d", limited.ID)
	c.do(http.MethodPatch, path, map[string]any{"models": []string{"demo", "nope"}}).apiErr(t, 400, "unknown_model")
	c.ok(http.MethodPatch, path, map[string]any{"models": []string{"demo", "gpt-4o-mini"}})
}

// TestConsoleModelsAndKeys: the models page shows each price in dollars;
// a key is created with models ticked from that list, shown once by
// name, then renamed and edited in its dialog; its rate limits, set by
// an administrator, are shown and not offered for editing.
func TestConsoleModelsAndKeys(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	createUser(g, "kim", 5_000_000, "user")
	admin := loggedIn(t, g, "boss", 0, "admin")
	b := startBrowser(t, g)
	b.logInAs("kim")

	b.open("/console/models", `!document.getElementById('models-card').hidden`)
	price := func(model string) string {
		return evalJS[string](b, fmt.Sprintf(`document.querySelector('tr[data-model=%q] td.price').innerText`, model))
	}
	for model, want := range map[string][]string{
		"gpt-4o-mini":             {"$0.15 per 1M input tokens", "$0.60 per 1M output tokens"},
		"dall-e-3":                {"$0.04 per image (1024x1024 standard)"},
		"whisper-1":               {"$0.0001 per second of audio"},
		"tts-1":                   {"$15.00 per 1M characters"},
		"rerank-v3.5":             {"$0.002 per search unit"},
		"MiniMax-Hailuo-02":       {"$0.082 per second of video"},
		"gpt-4o-realtime-preview": {"$40.00 per 1M audio input tokens", "$80.00 per 1M audio output tokens"},
		"demo":                    {"$1.00 per 1M input tokens", "$2.00 per 1M output tokens"},
	} {
		got := price(model)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s shows %q, want %q in it", model, got, w)
			}
		}
	}
	b.screenshot("models-desktop")

	// create a key for two models ticked from the list
	b.open("/", `document.querySelectorAll('#token-models input[type=checkbox]').length === 9`)
	b.do(chromedp.SendKeys(chromedp.ID("token-name"), "ci"),
		chromedp.Click(chromedp.CSS(`#token-models input[value="gpt-4o-mini"]`)),
		chromedp.Click(chromedp.CSS(`#token-models input[value="demo"]`)),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(`!document.getElementById('new-key').hidden`)
	if name, note := b.text("new-key-name"), b.text("new-key"); name != "ci" || !strings.Contains(note, "will not be shown again") {
		t.Fatalf("the new key is shown as %q with %q", name, note)
	}
	key := b.text("new-key-value")
	kim := newClient(t, g)
	kim.login("kim")
	var list struct{ Data []apiToken }
	kim.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	if len(list.Data) != 1 || strings.Join(list.Data[0].Models, ",") != "demo,gpt-4o-mini" {
		t.Fatalf("the key made on the page: %+v", list.Data)
	}
	id := list.Data[0].ID
	if resp, _ := g.Do(http.MethodGet, "/v1/models", key, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("the new key gets %d", resp.StatusCode)
	}

	// an administrator limits the key; the owner sees it, read only
	admin.ok(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", id), map[string]any{"limits": map[string]int64{"rpm": 7}})
	b.open("/", fmt.Sprintf(`document.querySelector('#tokens tr[data-token-id="%d"]') !== null`, id))
	if row := evalJS[string](b, fmt.Sprintf(`document.querySelector('#tokens tr[data-token-id="%d"]').textContent`, id)); !strings.Contains(row, "7 requests/min") {
		t.Fatalf("the key's row %q does not show its rate limit", row)
	}

	// edit: rename, only demo, a $2 limit, an expiry
	day := time.Now().AddDate(0, 0, 10).Format("2006-01-02")
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit key ci"]`)))
	b.waitFor(`document.getElementById('edit-key').open`)
	if lim := b.text("edit-limits"); !strings.Contains(lim, "7 requests/min") || !strings.Contains(lim, "Only an administrator") {
		t.Fatalf("the dialog says %q of the limits", lim)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#edit-key input[id*=rpm], #edit-key input[id*=limit]').length`); n != 0 {
		t.Fatalf("the dialog offers %d rate-limit fields to a user", n)
	}
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById('edit-name').value = 'ci-renamed';
		document.getElementById('edit-quota').value = '2';
		document.getElementById('edit-expires').value = %q;`, day)),
		chromedp.Click(chromedp.CSS(`#edit-models input[value="gpt-4o-mini"]`)))
	b.screenshot("key-edit-desktop")
	b.do(chromedp.Click(chromedp.ID("edit-save")))
	b.waitFor(`!document.getElementById('edit-key').open`)
	b.waitFor(`document.getElementById('tokens').textContent.includes('ci-renamed')`)
	kim.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	got := list.Data[0]
	if got.Name != "ci-renamed" || strings.Join(got.Models, ",") != "demo" || got.QuotaLimit != 2_000_000 || !strings.HasPrefix(got.ExpiresAt, day[:8]) || got.Limits.RPM != 7 {
		t.Fatalf("after editing: %+v", got)
	}
	exp, _ := time.Parse(time.RFC3339, got.ExpiresAt)
	if d := time.Until(exp); d < 9*24*time.Hour || d > 11*24*time.Hour {
		t.Fatalf("expiry %s is not about ten days ahead", got.ExpiresAt)
	}

	// an edit that changes only the name leaves the rest as it was
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit key ci-renamed"]`)))
	b.waitFor(`document.getElementById('edit-key').open`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('edit-name').value = 'ci-2'`), chromedp.Click(chromedp.ID("edit-save")))
	b.waitFor(`document.getElementById('tokens').textContent.includes('ci-2')`)
	kim.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	if list.Data[0].ExpiresAt != got.ExpiresAt || list.Data[0].QuotaLimit != 2_000_000 {
		t.Fatalf("a rename changed the key: %+v", list.Data[0])
	}
	if list.Data[0].Management {
		t.Fatal("a key made without the box ticked is a management key")
	}

	// a management key: the box ticked, the row marked, and the key
	// reaches the account API where the first one is refused
	scripted := newClient(t, g)
	scripted.bearer = key
	scripted.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 403, "management_key_required")
	b.do(chromedp.SendKeys(chromedp.ID("token-name"), "ops"),
		chromedp.Click(chromedp.ID("token-management")),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(`document.getElementById('new-key-name').textContent === 'ops'`)
	scripted.bearer = b.text("new-key-value")
	if u := scripted.self(); u.Username != "kim" {
		t.Fatalf("self with the management key: %+v", u)
	}
	b.waitFor(`[...document.querySelectorAll('#tokens tr')].some((r) => r.textContent.includes('ops (management)'))`)
}

// TestConsolePasswordAndUsage: the password changed on the page; usage
// rows with their error text, a deleted key named as such, the model
// filter by a part of the name in any case; a redeemed code's new
// balance in the message with the chart and table refreshed; a transfer
// refusal in dollars.
func TestConsolePasswordAndUsage(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	createUser(g, "lee", 5_000_000, "user")
	code := makeCodes(t, g, 1, 3_000_000)[0]
	b := startBrowser(t, g)
	b.logInAs("lee")

	// change the password
	b.do(chromedp.SendKeys(chromedp.ID("password-current"), "password-lee"),
		chromedp.SendKeys(chromedp.ID("password-new"), "a-new-password-lee"),
		chromedp.Click(chromedp.ID("password-submit")))
	b.waitFor(`document.getElementById('password-feedback').textContent !== '' || document.getElementById('password-error').textContent !== ''`)
	if fb := b.text("password-feedback"); !strings.Contains(fb, "Password changed") {
		t.Fatalf("after changing the password: %q %q", fb, b.text("password-error"))
	}
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "lee", "password": "password-lee"}).apiErr(t, 401, "invalid_credentials")
	lee := newClient(t, g)
	lee.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "lee", "password": "a-new-password-lee"})
	// a wrong current password is refused in words
	b.do(chromedp.SendKeys(chromedp.ID("password-current"), "not-my-password"),
		chromedp.SendKeys(chromedp.ID("password-new"), "another-password"),
		chromedp.Click(chromedp.ID("password-submit")))
	b.waitFor(`document.getElementById('password-error').textContent !== ''`)

	// usage: a demo answer, a gpt-4o-mini failure (its upstream is not
	// there), both by a key deleted afterwards
	var tk apiToken
	lee.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "gone"}).decode(t, &tk)
	if st := chatOnce(t, g, tk.Key, "hello"); st != 200 {
		t.Fatalf("demo answered %d", st)
	}
	resp, _ := g.Do(http.MethodPost, "/v1/chat/completions", tk.Key, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode < 500 {
		t.Fatalf("gpt-4o-mini with no upstream answered %d", resp.StatusCode)
	}
	rows := g.WaitUsage("lee", 2)
	lee.ok(http.MethodDelete, fmt.Sprintf("/api/user/tokens/%d", tk.ID), struct{}{})
	var failed gatewaytest.UsageRow
	for _, r := range rows {
		if r.Model == "gpt-4o-mini" {
			failed = r
		}
	}
	if failed.Error == "" {
		t.Fatalf("no error text on the failed row: %+v", rows)
	}

	b.open("/", `document.querySelectorAll('#usage tr').length === 2`)
	table := evalJS[string](b, `document.getElementById('usage').innerText`)
	if strings.Contains(table, "#"+fmt.Sprint(tk.ID)) || strings.Count(table, "deleted key") != 2 {
		t.Fatalf("a deleted key's rows show %q", table)
	}
	if !strings.Contains(table, failed.Error) {
		t.Fatalf("the failed row's error %q is not shown: %q", failed.Error, table)
	}
	for _, r := range rows {
		if !strings.Contains(table, dollarsText(r.Cost)) {
			t.Fatalf("the cost %s of a row is not shown in dollars: %q", dollarsText(r.Cost), table)
		}
	}
	filter := func(text string) []string {
		b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById('usage-model').value = %q`, text)),
			chromedp.Click(chromedp.ID("usage-filter")))
		b.waitFor(`document.getElementById('usage').dataset.loading === 'no'`)
		return evalJS[[]string](b, `[...document.querySelectorAll('#usage tr')].map((tr) => tr.children.length > 1 ? tr.children[1].textContent : tr.textContent)`)
	}
	if got := filter("GPT-4O"); strings.Join(got, ",") != "gpt-4o-mini" {
		t.Fatalf("filtering by GPT-4O shows %v", got)
	}
	if got := filter("emo"); strings.Join(got, ",") != "demo" {
		t.Fatalf("filtering by emo shows %v", got)
	}
	if got := filter("claude"); len(got) != 1 || !strings.Contains(got[0], "No requests match") {
		t.Fatalf("filtering by claude shows %v", got)
	}
	if opts := evalJS[int](b, `document.querySelectorAll('#usage-models option').length`); opts != 9 {
		t.Fatalf("the filter suggests %d models", opts)
	}
	b.screenshot("usage-desktop")

	// a request made after the page loaded, then redeem: balance,
	// message, chart and table all show it
	b.open("/", `document.querySelectorAll('#usage tr').length === 2 && document.getElementById('chart-summary').textContent !== ''`)
	chartBefore := b.text("chart-summary")
	key := g.AddToken("lee")
	if st := chatOnce(t, g, key, "one more"); st != 200 {
		t.Fatalf("demo answered %d", st)
	}
	g.WaitUsage("lee", 3)
	b.do(chromedp.SendKeys(chromedp.ID("redeem-key"), code), chromedp.Click(chromedp.ID("redeem-submit")))
	b.waitFor(`document.getElementById('redeem-feedback').textContent !== '' || document.getElementById('redeem-error').textContent !== ''`)
	quota, _ := g.Quota("lee")
	want := "Redeemed: your balance is now " + dollarsText(quota) + "."
	if fb := b.text("redeem-feedback"); fb != want || b.text("quota") != dollarsText(quota) {
		t.Fatalf("after redeeming: message %q, balance %q; want %q", fb, b.text("quota"), want)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#usage tr').length`); n != 3 {
		t.Fatalf("the usage table has %d rows after redeeming, want 3", n)
	}
	if b.text("chart-summary") == chartBefore {
		t.Fatalf("the chart did not refresh: still %q", chartBefore)
	}

	// a transfer beyond the invitation quota is refused in dollars
	b.do(chromedp.SendKeys(chromedp.ID("transfer-amount"), "1.5"), chromedp.Click(chromedp.ID("transfer-submit")))
	b.waitFor(`document.getElementById('transfer-error').textContent !== ''`)
	if msg := b.text("transfer-error"); msg != "$1.50 is more than your invitation quota of $0.00" {
		t.Fatalf("the transfer refusal says %q", msg)
	}
}

// TestConsoleSignUpLogsIn: signing up after a failed login clears the
// login error and logs the new user in.
func TestConsoleSignUpLogsIn(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "newbie"),
		chromedp.SendKeys(chromedp.ID("login-password"), "not-yet-an-account\r"))
	b.waitFor(`document.getElementById('login-error').textContent !== ''`)
	b.do(chromedp.SendKeys(chromedp.ID("reg-username"), "newbie"),
		chromedp.SendKeys(chromedp.ID("reg-password"), "password-newbie"),
		chromedp.Click(chromedp.ID("register-submit")))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent === 'newbie'`)
	if msg := b.text("login-error"); msg != "" {
		t.Fatalf("the old login error stays: %q", msg)
	}
}

// noSideScroll asserts that the page does not scroll sideways.
func (b *browserSession) noSideScroll(page string) {
	b.t.Helper()
	w := evalJS[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`)
	if b.width > 0 && w[1] > b.width {
		w[1] = b.width
	}
	if w[0] > w[1] {
		wide := evalJS[string](b, `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5).slice(0, 5).map((e) => e.tagName + '#' + e.id + '.' + e.className).join(' ')`)
		b.t.Errorf("%s at %d px scrolls sideways to %d px; too wide: %s", page, w[1], w[0], wide)
	}
}

// TestConsoleOnPhone: at 390 px no page scrolls sideways once logged in,
// with tables full of rows, and the chart's labels keep their size.
func TestConsoleOnPhone(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	createUser(g, "pat", 5_000_000, "user")
	admin := loggedIn(t, g, "boss", 0, "admin")
	makeCodes(t, g, 3, 1_000_000)
	for i := range 3 {
		createUser(g, fmt.Sprintf("a-rather-long-user-name-%d", i), 1_234_567, "user")
	}
	pat := newClient(t, g)
	pat.login("pat")
	var tk apiToken
	pat.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "a key with a long name for a phone", "models": []string{"demo", "gpt-4o-mini"}}).decode(t, &tk)
	admin.ok(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", tk.ID), map[string]any{"limits": map[string]int64{"rpm": 60, "tpm": 100000}})
	chatOnce(t, g, tk.Key, "hello from a phone")
	g.Do(http.MethodPost, "/v1/chat/completions", tk.Key, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), nil)
	g.WaitUsage("pat", 2)

	b := startBrowser(t, g)
	b.logInAs("pat")
	b.phone()
	b.open("/", `document.querySelectorAll('#usage tr').length === 2 && document.querySelectorAll('#chart-labels span').length > 0`)
	b.noSideScroll("the home page")
	// the chart's labels are text at their own size, apart from each other
	labels := evalJS[[][]float64](b, `[...document.querySelectorAll('#chart-labels span')].map((s) => { const r = s.getBoundingClientRect(); return [r.left, r.right, parseFloat(getComputedStyle(s).fontSize)]; })`)
	if len(labels) < 4 || evalJS[int](b, `document.querySelectorAll('#chart text').length`) != 0 {
		t.Fatalf("chart labels %v", labels)
	}
	for i, l := range labels {
		if l[2] < 10 || (i > 0 && l[0] < labels[i-1][1]) || l[0] < 0 {
			t.Fatalf("chart labels squashed or overlapping: %v", labels)
		}
	}
	// a stacked row: each cell labelled with its column
	if lbl := evalJS[string](b, `getComputedStyle(document.querySelector('#usage td'), '::before').content`); lbl != `"Time"` {
		t.Fatalf("a usage cell on a phone is labelled %s", lbl)
	}
	b.screenshot("dashboard-phone-stacked")
	b.open("/console/models", `!document.getElementById('models-card').hidden`)
	b.noSideScroll("the models page")
	b.screenshot("models-phone")
	b.open("/console/playground", `!document.getElementById('playground').hidden`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('prompt').value = '| a | b |\n|---|---|\n| `+strings.Repeat("wide ", 30)+` | x |'`),
		chromedp.Click(chromedp.ID("send")))
	b.waitFor(`document.querySelector('.msg.assistant table') !== null && document.getElementById('stop').disabled`)
	b.do(chromedp.Click(chromedp.ID("show-code")))
	b.waitFor(`!document.getElementById('code-card').hidden`)
	b.noSideScroll("the playground")
	b.screenshot("playground-phone-code")

	b.desktop()
	b.open("/", `!document.getElementById('logout').hidden`)
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.logInAs("boss")
	b.phone()
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 5 && document.querySelectorAll('#codes tr').length >= 3`)
	b.noSideScroll("the admin page")
	b.screenshot("admin-phone-stacked")
	// at 1280 px no table is wider than its card
	b.desktop()
	b.tablesFit("the admin page")
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`location.pathname === '/' && !!document.getElementById('login-card') && !document.getElementById('login-card').hidden`)
	b.logInAs("pat")
	b.open("/", `document.querySelectorAll('#usage tr').length >= 2 && document.querySelectorAll('#tokens tr[data-token-id]').length >= 1`)
	b.tablesFit("the home page")
	b.open("/console/models", `!document.getElementById('models-card').hidden`)
	b.tablesFit("the models page")
}
