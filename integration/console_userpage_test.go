package integration

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The operator's day in the console (issue 32): a page for one user
// (keys disabled and edited, plan and group picked, sessions ended),
// plans picked rather than typed, plan codes minted and redeemed, the
// invitation link and rule; at 1280 and 390 px, in English and Chinese,
// with no page scrolling sideways and no table wider than its card.

// userPageConfig is the account gateway with two plans and a budget
// group, registration open and a reward for invitations.
func userPageConfig() *caddyfile {
	return accountConfig("on", 1000, 1000).
		option(block("plan pro", "daily 5", "models demo") + "\n" + block("plan team", "weekly 20")).
		option(block("budget_group staff", "plan team", "weekly 50"))
}

// tablesFit reports every table on the page, shown, that is wider than
// its card, and every card that scrolls sideways: a table wider than its
// card must scroll inside its own box (.table-wrap) within the card.
func (b *browserSession) tablesFit(page string) {
	b.t.Helper()
	bad := evalJS[[]string](b, `(() => {
		const bad = [];
		for (const t of document.querySelectorAll('table')) {
			if (!t.offsetParent) continue;
			const card = t.closest('.card, dialog');
			if (!card) continue;
			const box = t.closest('.table-wrap') || t;
			const c = card.getBoundingClientRect(), r = box.getBoundingClientRect();
			const scrolls = box !== t && getComputedStyle(box).overflowX === 'auto';
			if (r.right > c.right + 0.5 || r.left < c.left - 0.5 || (!scrolls && t.getBoundingClientRect().width > r.width + 0.5))
				bad.push((t.id || t.querySelector('tbody') && t.querySelector('tbody').id || '?') + ' ' + Math.round(r.width) + 'px in ' + Math.round(c.width) + 'px');
		}
		for (const c of document.querySelectorAll('.card')) {
			if (c.offsetParent && c.scrollWidth > c.clientWidth + 1) bad.push('card ' + (c.id || c.getAttribute('aria-labelledby')) + ' scrolls to ' + c.scrollWidth);
		}
		return bad;
	})()`)
	if len(bad) != 0 {
		b.t.Errorf("%s at %d px: tables wider than their cards: %s", page, evalJS[int](b, `window.innerWidth`), strings.Join(bad, "; "))
	}
}

// fits checks the page at the width it is shown at: nothing scrolls
// sideways, no table is wider than its card.
func (b *browserSession) fits(page string) {
	b.t.Helper()
	b.noSideScroll(page)
	b.tablesFit(page)
}

func (b *browserSession) setLang(lang string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`localStorage.setItem('gateway.lang', %q)`, lang)))
}

// TestConsoleUserPage: an administrator disables another user's key from
// that user's page and edits its limits and windows, assigns a plan from
// the picker (in the users list and on the user page), filters users by
// plan, ends a session and mints plan codes; first at 1280 px in English,
// then on a phone in Chinese.
func TestConsoleUserPage(t *testing.T) {
	g := gatewaytest.Start(t, userPageConfig().String(), nil)
	createUser(g, "ann", 3_000_000, "user")
	createUser(g, "bert", 1_000_000, "user")
	createUser(g, "other-admin", 0, "admin")
	ann := newClient(t, g)
	ann.login("ann")
	var laptop apiToken
	ann.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "laptop"}).decode(t, &laptop)
	if st := chatOnce(t, g, laptop.Key, "hello"); st != 200 {
		t.Fatalf("ann's key before: %d", st)
	}
	g.WaitUsage("ann", 1)
	annID := g.User("ann").ID

	b := adminBrowser(t, g, "boss")
	b.setLang("en")
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#users tr').length >= 4 && document.querySelectorAll('#user-plan-filter option').length === 3`)
	// the filters offer the configured plans and groups
	if got := evalJS[string](b, `[...document.querySelectorAll('#user-plan-filter option, #user-group-filter option')].map((o) => o.value).join(',')`); got != ",pro,team,,staff" {
		t.Fatalf("the plan and group filters offer %q", got)
	}
	// a plan from the picker: the configured plans, not free text
	b.click(`button[aria-label="Set the plan of bert"]`)
	b.waitFor(`document.getElementById('plan-dialog').open`)
	if got := evalJS[string](b, `[...document.querySelectorAll('#plan-dialog-pick option')].map((o) => o.value).join(',')`); got != ",pro,team" {
		t.Fatalf("the plan picker offers %q", got)
	}
	b.do(chromedp.SetValue(chromedp.ID("plan-dialog-pick"), "team"))
	b.click("#plan-dialog-save")
	b.waitFor(`!document.getElementById('plan-dialog').open`)
	b.waitFor(fmt.Sprintf(`document.querySelector('#users tr[data-user-id="%d"]').children[6].textContent === 'team'`, g.User("bert").ID))
	if ub, err := g.Store().UserBudget(context.Background(), g.User("bert").ID); err != nil || ub.Plan != "team" || !ub.PlanUntil.IsZero() {
		t.Fatalf("bert's plan after the picker: %+v %v", ub, err)
	}
	// filtered by plan: the gateway's filter
	b.do(chromedp.SetValue(chromedp.ID("user-plan-filter"), "team"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('user-plan-filter').dispatchEvent(new Event('change'))`))
	b.waitFor(`[...document.querySelectorAll('#users tr')].map((tr) => tr.children[1].textContent).join(',') === 'bert'`)
	b.fits("the users list")
	b.screenshot("userpage-admin-desktop")

	// ann's page, from her name in the list
	b.do(chromedp.SetValue(chromedp.ID("user-plan-filter"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('user-plan-filter').dispatchEvent(new Event('change'))`))
	// clicked where it is found, in one evaluation: the list is drawn
	// again when the filter's answer comes, and a node found by one call
	// is gone by the next (CI: "Could not find node with given id")
	b.waitFor(`(() => { const a = document.querySelector('#users a[href="/console/user?id=` + fmt.Sprint(annID) + `"]'); if (a) a.click(); return !!a })()`)
	b.waitFor(`location.pathname === '/console/user' && !!document.getElementById('admin') && !document.getElementById('admin').hidden && document.querySelectorAll('#keys tr[data-token-id]').length === 1`)
	b.waitFor(`document.querySelectorAll('#balance tr').length > 0 && document.querySelectorAll('#user-audit tr').length > 0 && document.querySelectorAll('#sessions tr[data-session]').length === 1`)
	if got := b.text("user-title"); got != "ann" {
		t.Fatalf("the page's title names %q", got)
	}
	if got := b.text("profile-quota"); !strings.HasPrefix(got, "$2.99") {
		t.Fatalf("ann's balance shows %q", got)
	}
	// the balance history has the day's spend
	if got := evalJS[string](b, `document.querySelector('#balance tr[data-kind="spend"]').textContent`); !strings.Contains(got, "1 requests") {
		t.Fatalf("the day's spend reads %q", got)
	}
	if !evalJS[bool](b, `!!document.getElementById('signin-actions')`) {
		t.Fatal("the user page has no Sign-in place for the sign-in buttons")
	}
	// the Sign-in card issues a one-time reset link to hand over
	b.waitFor(`!!document.getElementById('signin-reset-issue')`)
	b.click("#signin-reset-issue")
	b.waitFor(`!document.getElementById('signin-reset-link').hidden`)
	if got := b.text("signin-reset-url"); !strings.Contains(got, "/console/reset#") {
		t.Fatalf("the reset link reads %q", got)
	}

	// disable her key: the gateway refuses it at once
	b.click(`#keys button[aria-label="Disable key laptop"]`)
	b.waitFor(`document.querySelector('#keys tr[data-token-id]').children[2].textContent === 'disabled'`)
	eventually(t, "the disabled key is refused", func() bool { return chatOnce(t, g, laptop.Key, "hello") == http.StatusUnauthorized })
	// limits, a window and an expiry from the key's dialog
	b.click(`#keys button[aria-label="Edit key laptop"]`)
	b.waitFor(`document.getElementById('key-dialog').open`)
	b.do(chromedp.SendKeys(chromedp.ID("key-rpm"), "30"), chromedp.SendKeys(chromedp.ID("key-window-daily"), "2.5"),
		chromedp.SendKeys(chromedp.ID("key-quota"), "4"))
	b.fits("the key dialog")
	b.click("#key-save")
	b.waitFor(`!document.getElementById('key-dialog').open && document.querySelector('#keys tr[data-token-id]').textContent.includes('30 requests/min')`)
	if got := b.text("keys"); !strings.Contains(got, "daily $2.50") || !strings.Contains(got, "$4.00") {
		t.Fatalf("the key row after the edit: %q", got)
	}
	tk, err := g.Store().TokenByID(context.Background(), laptop.ID)
	if err != nil || tk.Limits.RPM != 30 || tk.QuotaLimit != 4_000_000 || tk.Status != "disabled" {
		t.Fatalf("the key in the store: %+v %v", tk, err)
	}
	// the plan picker on her page, with an end
	b.do(chromedp.SetValue(chromedp.ID("plan-pick"), "pro"), chromedp.SetValue(chromedp.ID("group-pick"), "staff"),
		chromedp.SetValue(chromedp.ID("plan-until"), "2031-06-30"))
	b.click("#plan-save")
	b.waitFor(`document.getElementById('plan-feedback').textContent !== '' || document.getElementById('plan-error').textContent !== ''`)
	if got := b.text("plan-now"); !strings.Contains(got, "Plan pro until") || !strings.Contains(got, "2031") || !strings.Contains(got, "staff") {
		t.Fatalf("ann's plan reads %q (%s)", got, b.pageErrors())
	}
	if ub, _ := g.Store().UserBudget(context.Background(), annID); ub.Plan != "pro" || ub.Group != "staff" || ub.PlanUntil.Year() != 2031 {
		t.Fatalf("ann's plan in the store: %+v", ub)
	}
	// the windows that apply now: her plan's and her group's, with spend
	b.waitFor(`document.querySelectorAll('#windows tr[data-window]').length >= 2`)
	// end her session: her login is refused
	b.do(chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
	b.click(`#sessions button[aria-label^="End session"]`)
	b.waitFor(`document.querySelectorAll('#sessions tr[data-session]').length === 0`)
	ann.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	// every change is in the page's audit list
	b.waitFor(`['key.update', 'key.budget', 'user.plan', 'user.sessions_end'].every((a) => !!document.querySelector('#user-audit tr[data-action="' + a + '"]'))`)
	b.fits("the user page")
	b.screenshot("userpage-desktop")

	// plan codes minted from the console, with their plan in the table
	b.open("/console/admin", `!document.getElementById('admin').hidden && !document.getElementById('code-kind').disabled`)
	b.do(chromedp.SetValue(chromedp.ID("code-kind"), "plan"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('code-kind').dispatchEvent(new Event('change'))`),
		chromedp.SetValue(chromedp.ID("code-plan"), "pro"), chromedp.SetValue(chromedp.ID("code-plan-days"), "10"),
		chromedp.SetValue(chromedp.ID("code-count"), "2"), chromedp.SendKeys(chromedp.ID("code-name"), "pro-promo"))
	b.click("#code-submit")
	b.waitFor(`!document.getElementById('new-codes').hidden && document.querySelectorAll('#codes tr').length === 2`)
	if got := evalJS[string](b, `document.querySelector('#codes tr').children[4].textContent`); got != "pro for 10 days" {
		t.Fatalf("a plan code's plan shows %q", got)
	}
	b.fits("the codes")

	// on a phone, in Chinese: the same pages
	b.setLang("zh")
	b.phone()
	b.open(fmt.Sprintf("/console/user?id=%d", annID), `document.documentElement.lang === 'zh-CN' && !document.getElementById('admin').hidden && document.querySelectorAll('#keys tr[data-token-id]').length === 1`)
	if got := b.text("h-user-keys"); got != "API 密钥" {
		t.Fatalf("the keys heading in Chinese: %q", got)
	}
	// dates in the page's language
	if got := b.text("plan-now"); !strings.Contains(got, "2031年") {
		t.Fatalf("the plan's end in Chinese: %q", got)
	}
	b.click(`#keys button[aria-label="启用密钥 laptop"]`)
	b.waitFor(`document.querySelector('#keys tr[data-token-id]').children[2].textContent === '已启用'`)
	eventually(t, "the enabled key answers", func() bool { return chatOnce(t, g, laptop.Key, "hello") == 200 })
	b.fits("the user page on a phone")
	b.screenshot("userpage-phone-zh")
	b.open("/console/admin", `!document.getElementById('admin').hidden && document.querySelectorAll('#codes tr').length === 2`)
	b.click(`button[aria-label="设置 ann 的套餐"]`)
	b.waitFor(`document.getElementById('plan-dialog').open`)
	b.do(chromedp.SetValue(chromedp.ID("plan-dialog-pick"), ""))
	b.click("#plan-dialog-save")
	b.waitFor(`!document.getElementById('plan-dialog').open`)
	eventually(t, "ann's plan removed", func() bool {
		ub, _ := g.Store().UserBudget(context.Background(), annID)
		return ub.Plan == ""
	})
	b.fits("the admin page on a phone")
	for _, p := range []string{"/console/dashboard", "/console/channels", "/console/usage-log", "/console/audit"} {
		b.open(p, `!document.getElementById('admin').hidden`)
		b.fits(p + " on a phone")
	}
	b.desktop()
	for _, p := range []string{"/console/dashboard", "/console/channels", "/console/usage-log", "/console/audit"} {
		b.open(p, `!document.getElementById('admin').hidden`)
		b.fits(p)
	}
}

// TestConsolePlansAndInvitations: a user's invitation link fills in the
// code at sign-up and the rule is said in words; the new user redeems a
// plan code and is told the plan and its end; a request the plan paid
// says so in the usage log; the inviter sees the invitee and the reward
// owed. In Chinese at 1280 px, then in English on a phone.
func TestConsolePlansAndInvitations(t *testing.T) {
	g := gatewaytest.Start(t, userPageConfig().String(), nil)
	createUser(g, "ivy", 0, "user")
	admin := loggedIn(t, g, "boss", 0, "admin")
	var minted struct {
		Data []struct {
			Code, Plan string
			PlanDays   int64 `json:"plan_days"`
		}
	}
	admin.ok(http.MethodPost, "/api/admin/codes", map[string]any{"count": 1, "plan": "pro", "plan_days": 10}).decode(t, &minted)
	if len(minted.Data) != 1 || minted.Data[0].Plan != "pro" || minted.Data[0].PlanDays != 10 {
		t.Fatalf("plan codes minted: %+v", minted)
	}
	code := minted.Data[0].Code
	ivyCode := g.User("ivy").InviteCode

	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.setLang("zh")
	// the link ivy hands out
	b.open("/?aff="+ivyCode, `document.documentElement.lang === 'zh-CN' && !document.getElementById('login-card').hidden`)
	if got := evalJS[string](b, `document.getElementById('reg-aff').value`); got != ivyCode {
		t.Fatalf("the invitation link fills in %q, want %q", got, ivyCode)
	}
	b.do(chromedp.SendKeys(chromedp.ID("reg-username"), "newbie"), chromedp.SendKeys(chromedp.ID("reg-password"), "password-newbie"),
		chromedp.Click(chromedp.ID("register-submit")))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('quota').textContent !== ''`)
	if g.User("newbie").InvitedBy != g.User("ivy").ID {
		t.Fatal("the invitee is not ivy's")
	}
	// a plan code: the answer names the plan and its end, in Chinese
	b.do(chromedp.SendKeys(chromedp.ID("redeem-key"), code), chromedp.Click(chromedp.ID("redeem-submit")))
	b.waitFor(`document.getElementById('redeem-feedback').textContent !== '' || document.getElementById('redeem-error').textContent !== ''`)
	end := time.Now().AddDate(0, 0, 10)
	if got := b.text("redeem-feedback"); !strings.Contains(got, "套餐 pro 已生效") || !strings.Contains(got, fmt.Sprintf("%d年%d月%d日", end.Year(), end.Month(), end.Day())) {
		t.Fatalf("the plan code's answer: %q (%s)", got, b.pageErrors())
	}
	b.waitFor(`!document.getElementById('plan-pays').hidden`)
	if got := b.text("plan-pays"); !strings.Contains(got, "你的套餐 pro") {
		t.Fatalf("the home page on a plan: %q", got)
	}
	// a request the plan pays: its row says so, the balance stays
	key := g.AddToken("newbie")
	if st := chatOnce(t, g, key, "on the plan"); st != 200 {
		t.Fatalf("a request on the plan: %d", st)
	}
	g.WaitUsage("newbie", 1)
	b.do(chromedp.Reload())
	b.waitFor(`!!document.querySelector('#usage span[data-plan="pro"]')`)
	if got := evalJS[string](b, `document.querySelector('#usage span[data-plan="pro"]').textContent`); !strings.Contains(got, "由套餐 pro 支付") {
		t.Fatalf("a row the plan paid: %q", got)
	}
	if got := b.text("quota"); got != "$0.00" {
		t.Fatalf("the balance after a request the plan paid: %q", got)
	}
	b.fits("the home page on a plan")
	b.screenshot("home-plan-zh")

	// ivy, in English on a phone: her link, the rule, newbie and the reward owed
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.setLang("en")
	b.phone()
	b.logInAs("ivy")
	b.waitFor(`document.querySelectorAll('#invitees tr').length === 1 && document.getElementById('invite-rule').textContent !== ''`)
	if got, want := b.text("invite-link"), g.URL+"/?aff="+ivyCode; got != want {
		t.Fatalf("ivy's link %q, want %q", got, want)
	}
	if got := b.text("invite-rule"); !strings.Contains(got, "first pays $0.25 or more") || !strings.Contains(got, "you get $0.25 of invitation quota") {
		t.Fatalf("the rule in words: %q", got)
	}
	if got := b.text("invitees"); !strings.Contains(got, "newbie") || !strings.Contains(got, "$0.25 to come") {
		t.Fatalf("ivy's invitees: %q", got)
	}
	if got := b.text("invite-pending"); !strings.Contains(got, "Signed up with your code: 1") || !strings.Contains(got, "$0.25") {
		t.Fatalf("ivy's pending rewards: %q", got)
	}
	b.fits("the home page with invitees on a phone")
	b.screenshot("home-invitations-phone")
	// newbie's home page on a phone: the windows table of the plan no
	// longer scrolls sideways
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.logInAs("newbie")
	b.waitFor(`document.querySelectorAll('#budget-table tr[data-window]').length > 0`)
	b.fits("the home page with spending windows on a phone")
	b.desktop()
	b.fits("the home page with spending windows")
}

// TestAdminUserPageAPI: the user page's routes answer as the rest of the
// admin API does: administrators only (a management key acts within
// itself), 403 not_allowed for an administrator's keys and sessions to
// anyone but root, the plans picked from those configured, plan codes in
// the CSV, and the redeem answer naming the plan and its end.
func TestAdminUserPageAPI(t *testing.T) {
	g := gatewaytest.Start(t, userPageConfig().String(), nil)
	boss := loggedIn(t, g, "boss", 0, "admin")
	carl := loggedIn(t, g, "carl", 0, "user")
	loggedIn(t, g, "other-admin", 0, "admin")
	g.AddToken("other-admin")
	carlID, adminID := g.User("carl").ID, g.User("other-admin").ID

	// users only get 403 not_admin
	carl.do(http.MethodGet, fmt.Sprintf("/api/admin/users/%d", carlID), nil).apiErr(t, 403, "admin_only")
	carl.do(http.MethodGet, "/api/admin/plans", nil).apiErr(t, 403, "admin_only")

	var plans struct {
		Plans []struct {
			Name    string
			Models  []string
			Windows map[string]int64
		}
		Groups []struct{ Name, Plan string }
	}
	boss.ok(http.MethodGet, "/api/admin/plans", nil).decode(t, &plans)
	if len(plans.Plans) != 2 || plans.Plans[0].Name != "pro" || plans.Plans[0].Windows["daily"] != 5_000_000 ||
		strings.Join(plans.Plans[0].Models, ",") != "demo" || len(plans.Groups) != 1 || plans.Groups[0].Plan != "team" {
		t.Fatalf("the configured plans: %+v", plans)
	}

	var page struct {
		User struct {
			Username, Plan, Group string
		}
		Tokens   []struct{ ID int64 }
		Sessions []struct{ ID string }
		Manage   bool
	}
	boss.ok(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/plan", carlID), map[string]string{"plan": "pro", "group": "staff"})
	boss.ok(http.MethodGet, fmt.Sprintf("/api/admin/users/%d", carlID), nil).decode(t, &page)
	if page.User.Username != "carl" || page.User.Plan != "pro" || page.User.Group != "staff" || len(page.Sessions) != 1 || !page.Manage {
		t.Fatalf("carl's page: %+v", page)
	}
	// the users list filters by plan and group and shows them
	var list struct {
		Data []struct{ Username, Plan, Group string }
	}
	boss.ok(http.MethodGet, "/api/admin/users?plan=pro&group=staff", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].Username != "carl" || list.Data[0].Plan != "pro" {
		t.Fatalf("users on pro in staff: %+v", list.Data)
	}
	boss.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/plan", carlID), map[string]string{"plan": "gold"}).apiErr(t, 400, "unknown_plan")

	// another administrator's key and sessions are root's to change
	var adminPage struct {
		Tokens   []struct{ ID int64 }
		Sessions []struct{ ID string }
		Manage   bool
	}
	boss.ok(http.MethodGet, fmt.Sprintf("/api/admin/users/%d", adminID), nil).decode(t, &adminPage)
	if adminPage.Manage || len(adminPage.Tokens) != 1 || len(adminPage.Sessions) != 1 {
		t.Fatalf("another administrator's page: %+v", adminPage)
	}
	boss.do(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", adminPage.Tokens[0].ID), map[string]string{"status": "disabled"}).apiErr(t, 403, "not_allowed")
	boss.do(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sessions", adminID), nil).apiErr(t, 403, "not_allowed")
	boss.do(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sessions", g.User("boss").ID), nil).apiErr(t, 403, "not_allowed")
	boss.do(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sessions/not-hex", carlID), nil).apiErr(t, 400, "invalid_session")
	boss.do(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sessions/0123456789abcdef", carlID), nil).apiErr(t, 404, "not_found")
	// a user's key: disabled, with a model not served refused
	carlKey := g.AddToken("carl")
	boss.ok(http.MethodGet, fmt.Sprintf("/api/admin/users/%d", carlID), nil).decode(t, &page)
	kid := page.Tokens[len(page.Tokens)-1].ID
	boss.do(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", kid), map[string]any{"models": []string{"nope"}}).apiErr(t, 400, "unknown_model")
	boss.ok(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", kid), map[string]string{"status": "disabled"})
	eventually(t, "carl's disabled key is refused", func() bool { return chatOnce(t, g, carlKey, "hi") == http.StatusUnauthorized })
	// a key acts here only as a management key, and changes no key wider
	// than itself
	plainKey := newClient(t, g)
	plainKey.bearer = g.AddToken("boss")
	plainKey.do(http.MethodGet, fmt.Sprintf("/api/admin/users/%d", carlID), nil).apiErr(t, 403, "management_key_required")
	for _, tc := range []struct {
		limit  int64
		status int
	}{{1_000_000, 403}, {0, 200}} {
		var mk apiToken
		boss.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "ops", "management": true, "quota_limit": tc.limit}).decode(t, &mk)
		manager := newClient(t, g)
		manager.bearer = mk.Key
		a := manager.do(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", kid), map[string]string{"status": "enabled"})
		if tc.status == 403 {
			a.apiErr(t, 403, "key_too_wide")
		} else if a.status != 200 {
			t.Fatalf("an unlimited management key enabling carl's key: %d %s", a.status, a.body)
		}
	}
	boss.ok(http.MethodPatch, fmt.Sprintf("/api/admin/tokens/%d", kid), map[string]string{"status": "disabled"})
	// one session ended by its id
	boss.ok(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sessions/%s", carlID, page.Sessions[0].ID), nil)
	carl.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")

	// plan codes: a plan configured, days, never quota too
	boss.do(http.MethodPost, "/api/admin/codes", map[string]any{"plan": "gold", "plan_days": 5}).apiErr(t, 400, "unknown_plan")
	boss.do(http.MethodPost, "/api/admin/codes", map[string]any{"plan": "pro", "plan_days": 5, "quota": 1}).apiErr(t, 400, "invalid_request")
	boss.do(http.MethodPost, "/api/admin/codes", map[string]any{"plan": "pro"}).apiErr(t, 400, "invalid_request")
	var minted struct{ Data []struct{ Code string } }
	boss.ok(http.MethodPost, "/api/admin/codes", map[string]any{"plan": "pro", "plan_days": 5, "name": "=plans"}).decode(t, &minted)
	export := boss.ok(http.MethodGet, "/api/admin/codes/export?search=plans", nil)
	recs, err := csv.NewReader(strings.NewReader(string(export.body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || strings.Join(recs[0][10:], ",") != "plan,plan_days" || recs[1][10] != "pro" || recs[1][11] != "5" || recs[1][1] != "'=plans" {
		t.Fatalf("the CSV of plan codes: %v", recs)
	}
	// redeemed: the answer names the plan and its end
	dora := loggedIn(t, g, "dora", 0, "user")
	var got struct {
		QuotaAdded int64  `json:"quota_added"`
		Plan       string `json:"plan"`
		PlanUntil  string `json:"plan_until"`
	}
	dora.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": minted.Data[0].Code}).decode(t, &got)
	until, err := time.Parse(time.RFC3339, got.PlanUntil)
	if err != nil || got.Plan != "pro" || got.QuotaAdded != 0 || until.Sub(time.Now().AddDate(0, 0, 5)).Abs() > time.Hour {
		t.Fatalf("the redeem answer: %+v (%v)", got, err)
	}
	// the invitations of a user: the rule as configured
	var inv struct {
		Reward     int64 `json:"reward"`
		MinPayment int64 `json:"min_payment"`
		Invitees   []any `json:"invitees"`
	}
	dora.ok(http.MethodGet, "/api/user/invitations", nil).decode(t, &inv)
	if inv.Reward != 250_000 || inv.MinPayment != 250_000 || inv.Invitees == nil || len(inv.Invitees) != 0 {
		t.Fatalf("dora's invitations: %+v", inv)
	}
}
