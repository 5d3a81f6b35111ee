package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestConsoleAlerts walks the alerts in one browser session: a user sets
// their key's thresholds in the edit dialog (a bad one refused there) and
// sees their own crossing on the alerts page; an administrator sees
// everyone's and filters by user; in English and Chinese, at 1280 and
// 390 px.
func TestConsoleAlerts(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	hook := newHookReceiver(t)
	g := gatewaytest.Start(t, alertsConfig("thresholds 50% 100%", "timeout 2s").String(),
		gatewaytest.Vars{"UP": up.URL, "HOOK": hook.URL})
	key := g.AddUser("alma", 100_000_000)
	g.CLI("user", "budget", "--username", "alma", "--daily", "0.001")
	createUser(g, "boss", 0, "admin")
	other := g.AddUser("otto", 100_000_000)
	g.CLI("user", "budget", "--username", "otto", "--daily", "0.001")
	for _, k := range []string{key, key, key, key, key, other, other, other, other, other} { // 50 % each
		if err := alertChat(context.Background(), g, k); err != nil {
			t.Fatal(err)
		}
	}
	st := g.Store()
	alma, otto := g.User("alma").ID, g.User("otto").ID
	eventually(t, "both alerts delivered", func() bool {
		l, _ := st.ListAlerts(context.Background(), store.AlertFilter{})
		return len(l) == 2 && settled(l)
	})

	b := startBrowser(t, g)
	b.desktop()
	b.logInAs("alma")
	// the key's own thresholds, in its edit dialog
	b.waitFor(`document.querySelector('#tokens button[aria-label^="Edit key"]') !== null`)
	// clicked from the page: the list is drawn again after a save
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#tokens button[aria-label^="Edit key"]').click()`))
	b.waitFor(`document.getElementById('edit-key').open && document.getElementById('edit-alerts').dataset.loaded === 'yes'`)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('edit-alerts').value = '30 150'`), chromedp.Click(chromedp.ID("edit-save")))
	b.waitFor(`document.getElementById('edit-error').textContent.includes('1 to 100')`)
	if !evalJS[bool](b, `document.getElementById('edit-key').open`) {
		t.Fatal("the dialog closed on a threshold of 150 %")
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('edit-alerts').value = '90 30%'`))
	b.screenshot("alerts-key-edit-desktop")
	b.do(chromedp.Click(chromedp.ID("edit-save")))
	b.waitFor(`!document.getElementById('edit-key').open`)
	toks, err := st.ListTokens(context.Background(), alma)
	if err != nil || len(toks) != 1 {
		t.Fatal(toks, err)
	}
	eventually(t, "the key's thresholds stored", func() bool {
		ts, _ := st.KeyAlertThresholds(context.Background(), toks[0].ID)
		return slices.Equal(ts, []int{30, 90})
	})
	// opened again, the dialog shows them
	// clicked from the page: the list is drawn again after a save
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#tokens button[aria-label^="Edit key"]').click()`))
	b.waitFor(`document.getElementById('edit-key').open && document.getElementById('edit-alerts').value === '30 90'`)
	b.do(chromedp.Click(chromedp.ID("edit-cancel")))

	// the user's own alert, from the home page's link
	b.do(chromedp.Click(chromedp.ID("nav-alerts")))
	rowsReady := `document.getElementById('alerts') && document.getElementById('alerts').dataset.loading === 'no'`
	b.waitFor(rowsReady + ` && document.querySelectorAll('#alerts tr[data-alert-id]').length === 1`)
	row := evalJS[string](b, `document.querySelector('#alerts tr[data-alert-id]').textContent`)
	if !strings.Contains(row, "account "+strconv.FormatInt(alma, 10)+" · daily (") || !strings.Contains(row, "50%") ||
		!strings.Contains(row, "$0.0005 / $0.001") || !strings.Contains(row, "delivered") {
		t.Fatalf("the user's alert reads %q", row)
	}
	if evalJS[bool](b, `!document.querySelector('th.alerts-admin').hidden || !document.getElementById('alerts-form').hidden`) {
		t.Fatal("a user is shown the administrators' column or filter")
	}
	b.screenshot("alerts-user-desktop")
	b.phone()
	b.noSideScroll("alerts (user, 390 px)")
	b.screenshot("alerts-user-phone")
	// in Chinese
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('gateway.lang', 'zh')`))
	b.open("/console/alerts", rowsReady+` && document.querySelectorAll('#alerts tr[data-alert-id]').length === 1`)
	if h, row := b.text("h-alerts"), evalJS[string](b, `document.querySelector('#alerts tr[data-alert-id]').textContent`); h != "已越过的阈值" ||
		!strings.Contains(row, "账户 ") || !strings.Contains(row, "已送达") {
		t.Fatalf("in Chinese the heading reads %q and the row %q", h, row)
	}
	b.noSideScroll("alerts (user, Chinese, 390 px)")
	b.screenshot("zh-alerts-user-phone")

	// an administrator: everyone's, then one user's
	b.do(chromedp.Evaluate[chromedp.Void](`fetch('/api/user/logout', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'})`))
	b.waitFor(`fetch('/api/user/self').then((r) => r.status === 401)`)
	b.logInAs("boss")
	b.open("/console/alerts", rowsReady+` && document.querySelectorAll('#alerts tr[data-alert-id]').length === 2`)
	if evalJS[bool](b, `document.querySelector('th.alerts-admin').hidden || document.getElementById('alerts-form').hidden`) {
		t.Fatal("an administrator is not shown the user column and filter")
	}
	if intro := b.text("alerts-intro-admin"); !strings.Contains(intro, "webhook") {
		t.Fatalf("the administrator's intro in Chinese reads %q", intro)
	}
	b.noSideScroll("alerts (administrator, Chinese, 390 px)")
	b.screenshot("zh-alerts-admin-phone")
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('gateway.lang', 'en')`))
	b.desktop()
	b.open("/console/alerts", rowsReady+` && document.querySelectorAll('#alerts tr[data-alert-id]').length === 2`)
	b.do(chromedp.SendKeys(chromedp.ID("alerts-user"), strconv.FormatInt(otto, 10)), chromedp.Click(chromedp.ID("alerts-filter")))
	b.waitFor(rowsReady + ` && document.querySelectorAll('#alerts tr[data-alert-id]').length === 1`)
	if user := evalJS[string](b, `document.querySelector('#alerts tr[data-alert-id] td:nth-child(2)').textContent`); user != strconv.FormatInt(otto, 10) {
		t.Fatalf("filtered to user %d, the row's user is %q", otto, user)
	}
	b.screenshot("alerts-admin-desktop")
	if errs := b.pageErrors(); errs != "" {
		t.Fatalf("page errors: %s", errs)
	}
}
