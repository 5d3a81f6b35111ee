package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleTopupInBrowser: a user picks a price on the top-up page, pays
// on the fake Stripe's hosted checkout page, comes back and sees the new
// balance and the payment; at 1280 px in English, then at 390 px in
// Chinese, in one browser session.
func TestConsoleTopupInBrowser(t *testing.T) {
	g, fake := startPayments(t)
	createUser(g, "mei", 0, "user")
	b := startBrowser(t, g)
	b.desktop()

	b.open("/", `!document.getElementById('login-card').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "mei"),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-mei\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('quota').textContent !== ''`)
	b.do(chromedp.Click(chromedp.ID("topup-link")))
	b.waitFor(`location.pathname === '/console/topup' && !!document.getElementById('topup') && !document.getElementById('topup').hidden`)
	if got := b.text("topup-balance"); got != "$0.00" {
		t.Fatalf("the balance before paying shows %q", got)
	}
	buttons := evalJS[[]string](b, `[...document.querySelectorAll('#topup-prices button')].map((e) => e.textContent)`)
	if strings.Join(buttons, " | ") != "Pay 10.00 USD, get $10.00 | Pay 20.00 USD, get $21.00" {
		t.Fatalf("the price list reads %q", buttons)
	}
	if got := b.text("topup-history"); got != "No payments yet." {
		t.Fatalf("the payments list reads %q", got)
	}
	b.noSideScroll("the top-up page")
	b.screenshot("topup-desktop-en")

	// pick the first price: to the provider's page, pay, and back
	b.do(chromedp.Click(chromedp.CSS(`#topup-prices button[data-price="usd10"]`)))
	b.waitFor(`location.href.startsWith(` + jsString(fake.BaseURL()+"/pay/") + `) && !!document.getElementById('pay')`)
	if got := b.text("amount"); got != "1000 usd" {
		t.Fatalf("the checkout page charges %q", got)
	}
	b.do(chromedp.Click(chromedp.ID("pay")))
	b.waitFor(`location.pathname === '/console/topup' && location.search === '?paid=1' && !!document.getElementById('topup') && !document.getElementById('topup').hidden`)
	if got := b.text("topup-balance"); got != "$10.00" {
		t.Fatalf("back from paying the balance shows %q, want $10.00", got)
	}
	if evalJS[bool](b, `document.getElementById('topup-returned').hidden`) {
		t.Fatal("back from paying, the page does not say so")
	}
	row := evalJS[[]string](b, `[...document.querySelectorAll('#topup-history tr[data-payment] td')].map((e) => e.textContent)`)
	if len(row) != 4 || row[1] != "10.00 USD" || row[2] != "$10.00" || row[3] != "paid" {
		t.Fatalf("the payment's row reads %q", row)
	}

	// on a phone, in Chinese: the larger price
	b.phone()
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('gateway.lang', 'zh')`))
	b.open("/console/topup", `document.documentElement.lang === 'zh-CN' && !!document.getElementById('topup') && !document.getElementById('topup').hidden`)
	if got := b.text("h-topup-buy"); got != "购买额度" {
		t.Fatalf("the heading in Chinese: %q", got)
	}
	if got := evalJS[string](b, `document.querySelector('#topup-prices button[data-price="usd20"]').textContent`); got != "支付 20.00 USD，获得 $21.00" {
		t.Fatalf("the second price in Chinese: %q", got)
	}
	b.noSideScroll("the top-up page on a phone")
	b.screenshot("topup-phone-zh")
	b.do(chromedp.Click(chromedp.CSS(`#topup-prices button[data-price="usd20"]`)))
	b.waitFor(`location.href.startsWith(` + jsString(fake.BaseURL()+"/pay/") + `) && !!document.getElementById('pay')`)
	b.do(chromedp.Click(chromedp.ID("pay")))
	b.waitFor(`location.search === '?paid=1' && !!document.getElementById('topup') && !document.getElementById('topup').hidden`)
	if got := b.text("topup-balance"); got != "$31.00" {
		t.Fatalf("after the second payment the balance shows %q, want $31.00", got)
	}
	statuses := evalJS[[]string](b, `[...document.querySelectorAll('#topup-history tr[data-payment] td:last-child')].map((e) => e.textContent)`)
	if strings.Join(statuses, ",") != "已支付,已支付" {
		t.Fatalf("the payments' statuses in Chinese: %q", statuses)
	}
	b.noSideScroll("the top-up page on a phone after paying")
	if u := g.User("mei"); u.Quota != 31_000_000 {
		t.Fatalf("stored balance %d, want 31000000", u.Quota)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
