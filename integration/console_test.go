package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// browserSession drives one headless Chromium (Debian's package; `make
// test` installs it) against a running gateway.
type browserSession struct {
	t     *testing.T
	ctx   context.Context
	g     *gatewaytest.Gateway
	shots string
	// width is the viewport's emulated width, 0 before phone or desktop:
	// a phone's browser zooms out a page wider than its screen, so the
	// window's own width grows with the page and cannot be the measure
	width int
}

func startBrowser(t *testing.T, g *gatewaytest.Gateway) *browserSession {
	t.Helper()
	skipBrowserOnPostgres(t)
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the console tests need Debian's chromium on PATH: run 'make test-deps' (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	// a bound for a broken page, so a failure ends instead of hanging
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })

	dir := os.Getenv("GATEWAY_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gateway-test-artifacts")
	}
	dir = filepath.Join(dir, "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	b := &browserSession{t: t, ctx: ctx, g: g, shots: dir}
	// the copy controls write to the clipboard; the test reads it back
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: g.URL})
			if err != nil {
				return fmt.Errorf("granting %s: %w", name, err)
			}
		}
		return nil
	}))
	return b
}

// browserEnv runs the browser tests in a PostgreSQL run too.
const browserEnv = "GATEWAY_TEST_BROWSER"

// skipBrowserOnPostgres ends a test where it would start a browser when the
// run is on PostgreSQL (unless GATEWAY_TEST_BROWSER=on): what a browser
// checks is the pages (their scripts, layout, languages and keyboard),
// which ask the same user and admin API on either database, and that API
// is tested on PostgreSQL by the tests that call it directly. Chromium is
// the largest share of a run's CPU (about 40 % of the SQLite run's, its
// 30 browser tests a third of the run's time), and make test runs the
// SQLite and PostgreSQL runs side by side on two cores, so the browser
// runs once, in the SQLite run. A test that checks other things first has
// checked them when it ends here.
func skipBrowserOnPostgres(t *testing.T) {
	t.Helper()
	if gatewaytest.OnPostgres() && os.Getenv(browserEnv) != "on" {
		t.Skipf("the browser's part runs in the SQLite run (%s=on runs it on PostgreSQL too)", browserEnv)
	}
}

func (b *browserSession) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v\npage errors: %s", err, b.pageErrors())
	}
}

func (b *browserSession) pageErrors() string {
	s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.error')].map(e => e.id + ': ' + e.textContent).filter(s => !s.endsWith(': ')).join('; ')`))
	return s
}

func evalJS[T any](b *browserSession, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript condition holds on the page.
func (b *browserSession) waitFor(cond string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Minute)))
		if err == nil {
			return
		}
		// a page that reloads itself (after logging in) ends the poll on
		// the old document; ask the new one. A poll that lands on the new
		// document while it is still being parsed finds its elements not
		// there yet (null): ask again too.
		if attempt < 10 && (strings.Contains(err.Error(), "navigated") || strings.Contains(err.Error(), "context with specified id") ||
			strings.Contains(err.Error(), "Cannot read properties of null")) {
			continue
		}
		b.t.Fatalf("waiting for %s: %v\npage errors: %s", cond, err, b.pageErrors())
	}
}

func (b *browserSession) text(id string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
}

// click clicks the first element sel matches once it is there and
// enabled, found and clicked in one evaluation. chromedp's Click finds a
// node, then its box, then presses the mouse at the box's centre, each a
// call of its own: a list drawn again between two calls leaves it a node
// that is gone (CI: "Could not find node with given id"), and a page that
// moves under it a press that lands on something else. Meant for a click
// that stays on the page: the evaluation that clicks answers before a
// navigation it starts, but one cut by it would be asked again of the
// new page (waitFor), where sel may match nothing.
func (b *browserSession) click(sel string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e || e.disabled) return false; e.click(); return true })()`, sel))
}

func (b *browserSession) open(path, readyCond string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.g.URL + path))
	b.waitFor(readyCond)
}

// screenshot saves the whole page as a PNG under the artifacts directory.
func (b *browserSession) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	file := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browserSession) phone() {
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.width = 390
}

func (b *browserSession) desktop() {
	b.do(chromedp.EmulateViewport(1280, 900))
	b.width = 1280
}

// TestConsoleInBrowser walks the console as a person would: the home view
// and its copy control, logging in with the keyboard, redeeming a code,
// creating a key, chatting in the playground with a streamed answer,
// stopping a stream, and the admin pages; with a screenshot of each page at
// phone and desktop widths.
func TestConsoleInBrowser(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	createUser(g, "carol", 0, "user")
	createUser(g, "boss", 0, "admin")
	code := makeCodes(t, g, 1, 5_000_000)[0]
	b := startBrowser(t, g)

	// home, logged out
	b.open("/", `!document.getElementById('login-card').hidden`)
	if got, want := b.text("base-url"), g.URL+"/v1"; got != want {
		t.Fatalf("base address shown %q, want %q", got, want)
	}
	if evalJS[bool](b, `!!document.getElementById('register-form')`) {
		t.Fatal("the registration form shows while registration is off")
	}
	b.screenshot("home-desktop")
	b.phone()
	b.screenshot("home-phone")
	b.desktop()
	b.do(chromedp.Click(chromedp.ID("copy-base")))
	b.waitFor(`document.getElementById('copy-base-feedback').textContent !== ''`)
	if fb := b.text("copy-base-feedback"); fb != "Copied." {
		t.Fatalf("copy feedback %q", fb)
	}
	if clip := evalJS[string](b, `navigator.clipboard.readText()`); clip != g.URL+"/v1" {
		t.Fatalf("clipboard holds %q", clip)
	}

	// a wrong password is reported in words
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "carol"),
		chromedp.SendKeys(chromedp.ID("login-password"), "wrong-password\r"))
	b.waitFor(`document.getElementById('login-error').textContent !== ''`)
	if msg := b.text("login-error"); !strings.Contains(msg, "wrong username or password") {
		t.Fatalf("login error shown: %q", msg)
	}
	// log in with the keyboard: Enter in the password field submits
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('login-password').value = ''`),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-carol\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('quota').textContent !== ''`)
	if q := b.text("quota"); q != "$0.00" {
		t.Fatalf("quota before redeeming: %q", q)
	}

	// redeem: the balance rises on the page
	b.do(chromedp.SendKeys(chromedp.ID("redeem-key"), code), chromedp.Click(chromedp.ID("redeem-submit")))
	b.waitFor(`document.getElementById('redeem-feedback').textContent !== '' || document.getElementById('redeem-error').textContent !== ''`)
	if q := b.text("quota"); q != "$5.00" {
		t.Fatalf("quota after redeeming a $5 code: %q (%s)", q, b.pageErrors())
	}
	b.do(chromedp.SendKeys(chromedp.ID("redeem-key"), code), chromedp.Click(chromedp.ID("redeem-submit")))
	b.waitFor(`document.getElementById('redeem-error').textContent !== ''`)
	if msg := b.text("redeem-error"); !strings.Contains(msg, "cannot be used") {
		t.Fatalf("a used code shows %q", msg)
	}

	// create a key: shown once, with a copy control, and it works
	b.do(chromedp.SendKeys(chromedp.ID("token-name"), "laptop"), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(`!document.getElementById('new-key').hidden`)
	key := b.text("new-key-value")
	if !strings.HasPrefix(key, "sk-") {
		t.Fatalf("new key shown as %q", key)
	}
	b.waitFor(`document.querySelectorAll('#tokens tr[data-token-id]').length === 1`)
	b.do(chromedp.Click(chromedp.ID("copy-key")))
	b.waitFor(`document.getElementById('copy-key-feedback').textContent === 'Copied.'`)
	if clip := evalJS[string](b, `navigator.clipboard.readText()`); clip != key {
		t.Fatal("the key's copy control did not copy the key")
	}
	if resp, body := g.Do(http.MethodGet, "/v1/models", key, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("the key from the page gets %d %s", resp.StatusCode, body)
	}
	b.screenshot("dashboard-desktop")
	b.open("/", `document.querySelectorAll('#tokens tr[data-token-id]').length === 1`)
	if evalJS[bool](b, fmt.Sprintf(`document.documentElement.outerHTML.includes(%q)`, key)) {
		t.Fatal("the key is shown again after a reload")
	}
	b.phone()
	b.screenshot("dashboard-phone")
	b.desktop()

	// the playground: a streamed, Markdown-rendered answer on the session
	b.open("/console/playground", `!document.getElementById('playground').hidden && document.getElementById('model').value === 'demo'`)
	b.do(chromedp.Evaluate[chromedp.Void](`
		window.lengths = [];
		new MutationObserver(() => {
			const a = document.querySelector('.msg.assistant .body');
			if (a) window.lengths.push(a.textContent.length);
		}).observe(document.getElementById('chat'), {subtree: true, childList: true, characterData: true});`))
	prompt := "Here is **bold** text and `inline code` in a sentence that is long enough to arrive in many pieces one word at a time"
	b.do(chromedp.SendKeys(chromedp.ID("prompt"), prompt), chromedp.Click(chromedp.ID("send")))
	b.waitFor(`document.getElementById('stop').disabled && document.querySelector('.msg.assistant') !== null && !document.querySelector('.msg.assistant .body').hasAttribute('aria-busy')`)
	if msg := b.text("chat-error"); msg != "" {
		t.Fatalf("playground error: %s", msg)
	}
	answer := evalJS[string](b, `document.querySelector('.msg.assistant .body').textContent`)
	plain := strings.NewReplacer("**", "", "`", "").Replace(prompt)
	if strings.TrimSpace(answer) != plain {
		t.Fatalf("answer %q, want the echo %q", answer, plain)
	}
	if !evalJS[bool](b, `document.querySelector('.msg.assistant strong')?.textContent === 'bold' && document.querySelector('.msg.assistant code')?.textContent === 'inline code'`) {
		t.Fatalf("the answer's Markdown was not rendered: %s", evalJS[string](b, `document.querySelector('.msg.assistant .body').innerHTML`))
	}
	var lengths []int
	if err := json.Unmarshal([]byte(evalJS[string](b, `JSON.stringify(window.lengths)`)), &lengths); err != nil {
		t.Fatal(err)
	}
	partial := map[int]bool{}
	for _, n := range lengths {
		if n > 0 && n < len(plain) {
			partial[n] = true
		}
	}
	if len(partial) < 3 {
		t.Fatalf("the answer did not stream in: lengths seen %v", lengths)
	}
	b.screenshot("playground-desktop")

	// billed to carol, under her playground token
	rows := g.WaitUsage("carol", 1)
	var tokens struct{ Data []apiToken }
	carol := newClient(t, g)
	carol.login("carol")
	carol.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &tokens)
	var playgroundID int64
	for _, tk := range tokens.Data {
		if tk.Name == "playground" {
			playgroundID = tk.ID
		}
	}
	if rows[0].TokenID == 0 || rows[0].TokenID != playgroundID || rows[0].Cost <= 0 || rows[0].Model != "demo" {
		t.Fatalf("playground usage row %+v; playground token %d", rows[0], playgroundID)
	}

	// stop a long answer part way
	long := strings.TrimSpace(strings.Repeat("word ", 400))
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById('prompt').value = %q`, long)), chromedp.Click(chromedp.ID("send")))
	b.waitFor(`document.querySelectorAll('.msg.assistant').length === 2 && document.querySelectorAll('.msg.assistant')[1].textContent.length > 20`)
	b.do(chromedp.Click(chromedp.ID("stop")))
	b.waitFor(`document.getElementById('status').textContent === 'Stopped.'`)
	got := evalJS[string](b, `document.querySelectorAll('.msg.assistant .body')[1].textContent`)
	if len(got) == 0 || len(got) >= len(long) {
		t.Fatalf("after stop the answer has %d of %d characters", len(got), len(long))
	}
	if evalJS[bool](b, `document.getElementById('send').disabled || !document.getElementById('stop').disabled`) {
		t.Fatal("send and stop buttons not reset after stopping")
	}
	b.phone()
	b.screenshot("playground-phone")
	b.desktop()

	// clearing empties the conversation
	b.do(chromedp.Click(chromedp.ID("clear")))
	if n := evalJS[int](b, `document.querySelectorAll('#chat .msg').length`); n != 0 {
		t.Fatalf("%d messages after clearing", n)
	}

	// the renderer escapes HTML and keeps code blocks literal
	rendered := evalJS[string](b, "renderMarkdown('<img src=x onerror=alert(1)> [x](javascript:alert(1)) [ok](https://example.org)\\n```html\\n<script>alert(1)</script>\\n```')")
	for _, bad := range []string{"<img", "<script", `href="javascript`} {
		if strings.Contains(rendered, bad) {
			t.Fatalf("rendered Markdown contains %s: %s", bad, rendered)
		}
	}
	for _, want := range []string{"&lt;img", `<pre><code class="language-html">&lt;script&gt;`, `<a href="https://example.org"`} {
		if !strings.Contains(rendered, want) {
			t.Fatalf("rendered Markdown lacks %s: %s", want, rendered)
		}
	}

	// a user's view of the admin page is a refusal in words
	b.open("/console/admin", `document.getElementById('page-error').textContent !== ''`)
	if evalJS[bool](b, `!document.getElementById('admin').hidden`) {
		t.Fatal("a user sees the admin pages")
	}

	// "log out everywhere" ends this browser's session and carol's other
	// one (the API client's), then log in again and out
	b.open("/", `!document.getElementById('logout-all').hidden && !document.getElementById('dashboard').hidden`)
	b.do(chromedp.Click(chromedp.ID("logout-all")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	carol.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	carol.login("carol")
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "carol"),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-carol\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden`)

	// log out, then in as an administrator
	b.open("/", `!document.getElementById('logout').hidden`)
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "boss"),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-boss\r"))
	b.waitFor(`!document.getElementById('nav-admin').hidden`)
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 3`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('code-count').value = '2'`), chromedp.SendKeys(chromedp.ID("code-quota"), "1.5"),
		chromedp.Click(chromedp.ID("code-submit")))
	b.waitFor(`!document.getElementById('new-codes').hidden`)
	newCodes := strings.Fields(b.text("new-codes-list"))
	if len(newCodes) != 2 {
		t.Fatalf("new codes shown: %q", newCodes)
	}
	b.waitFor(`document.querySelectorAll('#codes tr').length === 3`)
	carol.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": newCodes[0]})
	if q := carol.self().Quota; q <= 5_000_000 || q > 6_500_000 {
		t.Fatalf("a $1.50 code from the admin page took carol to %d units", q)
	}
	b.screenshot("admin-desktop")
	b.phone()
	b.screenshot("admin-phone")
}

// TestConsoleServesPages checks the console's HTTP behaviour without a
// browser: headers, the base address from the request, assets, refusals.
func TestConsoleServesPages(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	resp, body := g.Do(http.MethodGet, "/", "", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), g.URL+"/v1") {
		t.Fatalf("home: %d, base address missing", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	if !strings.Contains(string(body), `id="register-form"`) {
		t.Fatal("registration is on but the form is missing")
	}
	for _, p := range []string{"/console/playground", "/console/admin"} {
		if resp, _ := g.Do(http.MethodGet, p, "", nil, nil); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for asset, ctype := range map[string]string{"style.css": "text/css", "common.js": "text/javascript", "markdown.js": "text/javascript"} {
		resp, body := g.Do(http.MethodGet, "/console/assets/"+asset, "", nil, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Fatalf("%s: %d %q", asset, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/console/assets/web.go", "/console/assets/index.html", "/console/nope"} {
		if resp, _ := g.Do(http.MethodGet, p, "", nil, nil); resp.StatusCode != 404 {
			t.Fatalf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	if resp, _ := g.Do(http.MethodPost, "/", "", []byte("{}"), nil); resp.StatusCode != 405 {
		t.Fatalf("POST /: %d", resp.StatusCode)
	}
}

// playgroundConfig adds to the account configuration channels serving
// every kind of model, with the prices Caddyfile.example gives them; the
// upstreams are never called.
func playgroundConfig() *caddyfile {
	return accountConfig("off", 1000, 1000).
		channel("openai", "openai", "http://127.0.0.1:9", "sk-never-used-0001",
			"gpt-4o-mini text-embedding-3-small gpt-4o-realtime-preview dall-e-3 whisper-1 tts-1").
		channel("cohere", "cohere", "http://127.0.0.1:9", "never-used-0002", "rerank-v3.5").
		channel("minimax", "minimax", "http://127.0.0.1:9", "never-used-0003", "MiniMax-Hailuo-02").
		price("gpt-4o-mini", "input 0.15", "output 0.60").
		price("text-embedding-3-small", "input 0.02").
		price("gpt-4o-realtime-preview", "input 5", "output 20", "audio_input 40", "audio_output 80").
		price("dall-e-3", "image 1024x1024 standard 0.04").
		price("whisper-1", "audio_second 0.0001").
		price("tts-1", "characters 15").
		price("rerank-v3.5", "search_unit 0.002").
		price("MiniMax-Hailuo-02", "video_second 0.082", "max_seconds 6")
}

// TestPlaygroundOffersChatModels: with image, audio, Realtime, rerank,
// embedding and video models configured too, the playground offers only
// the models it can run, selects demo, and what is typed and sent is
// answered.
func TestPlaygroundOffersChatModels(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	createUser(g, "pia", 5_000_000, "user")
	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "pia"),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-pia\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden`)

	b.open("/console/playground", `!document.getElementById('playground').hidden`)
	offered := evalJS[[]string](b, `[...document.getElementById('model').options].map((o) => o.value)`)
	if strings.Join(offered, ",") != "demo,gpt-4o-mini" {
		t.Fatalf("the playground offers %v, want [demo gpt-4o-mini]", offered)
	}
	if sel := evalJS[string](b, `document.getElementById('model').value`); sel != "demo" {
		t.Fatalf("the playground selects %q, want demo", sel)
	}
	b.do(chromedp.SendKeys(chromedp.ID("prompt"), "hello playground"), chromedp.Click(chromedp.ID("send")))
	b.waitFor(`document.getElementById('stop').disabled && document.querySelector('.msg.assistant') !== null && !document.querySelector('.msg.assistant .body').hasAttribute('aria-busy')`)
	if msg := b.text("chat-error"); msg != "" {
		t.Fatalf("playground error: %s", msg)
	}
	if got := evalJS[string](b, `document.querySelector('.msg.assistant .body').textContent`); strings.TrimSpace(got) != "hello playground" {
		t.Fatalf("the answer shown is %q", got)
	}
}
