package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The audit log in the browser: a batch of codes made with a name in the
// console, a user edited there, a user made with the CLI, all shown with
// who did them, filtered, in Chinese, and on a phone; every code of the
// batch exported by the gateway as CSV.

// TestConsoleAuditLog: the operator's changes, the console's and the
// command line's, are listed newest first with their fields before and
// after, in dollars, never with a code's text.
func TestConsoleAuditLog(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).String(), nil)
	createUser(g, "ann", 1_000_000, "user") // by the CLI
	b := adminBrowser(t, g, "boss")
	dir := t.TempDir()
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, browser.SetDownloadBehavior,
			browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
		return err
	}))

	// a named batch of codes, made in the console
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 2`)
	b.do(chromedp.SendKeys(chromedp.ID("code-name"), "spring-promo"), chromedp.SetValue(chromedp.ID("code-count"), "3"),
		chromedp.SendKeys(chromedp.ID("code-quota"), "2.5"), chromedp.Click(chromedp.ID("code-submit")))
	b.waitFor(`!document.getElementById('new-codes').hidden && document.querySelectorAll('#codes tr').length === 3`)
	codes := strings.Fields(b.text("new-codes-list"))
	if len(codes) != 3 {
		t.Fatalf("new codes shown: %q", codes)
	}
	if got := evalJS[string](b, `document.querySelector('#codes tr').children[2].textContent`); got != "spring-promo" {
		t.Fatalf("the batch column shows %q", got)
	}
	// every code of the batch, from the gateway, as CSV
	b.do(chromedp.SendKeys(chromedp.ID("code-search"), "spring"), chromedp.Click(chromedp.ID("codes-csv-all")))
	file := filepath.Join(dir, "redemption-codes.csv")
	recs := downloadedCSV(t, file)
	if len(recs) != 4 || recs[0][1] != "name" || recs[1][1] != "spring-promo" || recs[1][4] != "$2.50" {
		t.Fatalf("the exported batch: %q", recs)
	}

	// a user's limits and quota, edited in the console
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit ann"]`)))
	b.waitFor(`document.getElementById('edit-user').open`)
	b.do(chromedp.SendKeys(chromedp.ID("edit-rpm"), "30"), chromedp.SendKeys(chromedp.ID("edit-quota-delta"), "1.5"),
		chromedp.Click(chromedp.ID("edit-user-save")))
	b.waitFor(`!document.getElementById('edit-user').open`)

	b.open("/console/audit", `document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length >= 3`)
	rows := func() []string {
		return evalJS[[]string](b, `[...document.querySelectorAll('#audit tr[data-audit-id]')].map((tr) => [...tr.children].slice(1).map((td) => td.textContent).join(' | '))`)
	}
	got := rows()
	// boss was made with the CLI too: user.create of ann, then of boss
	if len(got) != 4 || !strings.HasPrefix(got[0], "boss | user.update | user:") || !strings.HasPrefix(got[1], "boss | code.create | batch:spring-promo") ||
		!strings.HasPrefix(got[3], "the command line (cli) | user.create | user:") {
		t.Fatalf("the audit log shows %q", got)
	}
	if !strings.Contains(got[0], "quota: $1.00 → $2.50") || !strings.Contains(got[0], "limits.rpm: 0 → 30") || strings.Contains(got[0], "tpm") {
		t.Fatalf("the user's change: %q", got[0])
	}
	page := evalJS[string](b, `document.body.textContent`)
	for _, c := range codes {
		if strings.Contains(page, c) {
			t.Fatalf("the audit page shows the code %s", c)
		}
	}
	b.screenshot("admin-audit-desktop")

	// filters: the command line's, then every change to codes
	b.do(chromedp.SendKeys(chromedp.ID("audit-actor"), "cli"), chromedp.Click(chromedp.ID("audit-filter")))
	b.waitFor(`document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length === 2`)
	b.do(chromedp.Click(chromedp.ID("audit-clear")))
	b.waitFor(`document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length === 4`)
	b.do(chromedp.SetValue(chromedp.ID("audit-action"), "code."), chromedp.Click(chromedp.ID("audit-filter")))
	b.waitFor(`document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length === 1`)
	if a := evalJS[string](b, `document.querySelector('#audit tr[data-audit-id]').dataset.action`); a != "code.create" {
		t.Fatalf("filtered by code.: %q", a)
	}

	// on a phone, in English and in Chinese
	b.phone()
	b.open("/console/audit", `document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length === 4`)
	b.noSideScroll("the audit log")
	b.screenshot("admin-audit-phone")
	b.do(chromedp.Click(chromedp.ID("lang-toggle")))
	b.waitFor(`document.documentElement.lang === 'zh-CN' && document.getElementById('audit').dataset.loading === 'no' && document.querySelectorAll('#audit tr[data-audit-id]').length === 4`)
	if h := b.text("h-audit"); h != "谁修改了什么" {
		t.Fatalf("the heading in Chinese: %q", h)
	}
	if who := evalJS[string](b, `document.querySelector('#audit tr[data-audit-id]:last-child').children[1].textContent`); who != "命令行（cli）" {
		t.Fatalf("the CLI in Chinese: %q", who)
	}
	b.noSideScroll("the audit log in Chinese")
	b.screenshot("zh-admin-audit-phone")
	b.desktop()
}

// TestConsoleOperatorPagesInChinese: every operator's page is in Chinese
// once chosen, its static text and what its scripts write, and none
// scrolls sideways on a phone.
func TestConsoleOperatorPagesInChinese(t *testing.T) {
	d := startOperatorDay(t)
	b := adminBrowser(t, d.g, "boss")
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('gateway.lang', 'zh')`))
	b.phone()
	for _, p := range []struct{ path, ready, id, want string }{
		{"/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 3`, "h-codes", "兑换码"},
		{"/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 3`, "", ""},
		{"/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#by-rows tr').length === 3`, "", ""},
		{"/console/usage-log", `document.querySelectorAll('#log tr[data-id]').length === 4`, "h-log", "所有用户的请求"},
	} {
		b.open(p.path, p.ready)
		if b.lang() != "zh-CN" {
			t.Fatalf("%s: lang %q", p.path, b.lang())
		}
		if nav := evalJS[string](b, `document.querySelector('a[href="/console/audit"]').textContent`); nav != "审计日志" {
			t.Fatalf("%s: the audit log's link reads %q", p.path, nav)
		}
		if p.id != "" && b.text(p.id) != p.want {
			t.Fatalf("%s: %s reads %q, want %q", p.path, p.id, b.text(p.id), p.want)
		}
		b.noSideScroll(p.path + " in Chinese")
		b.screenshot("zh-admin" + strings.ReplaceAll(p.path, "/", "-") + "-phone")
	}
	// what a script writes: the edit buttons (their labels too) and the limits
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 3`)
	if got := evalJS[string](b, `document.querySelector('button[aria-label="编辑 ann"]').textContent`); got != "编辑" {
		t.Fatalf("the edit button reads %q", got)
	}
	b.desktop()
}
