package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The console in English and Chinese (web/i18n.js) and in light and dark:
// the switches in the header, each choice kept across reloads and pages,
// and the defaults taken from the browser's language and color scheme.

// lang is the page's language as <html lang> says it.
func (b *browserSession) lang() string {
	return evalJS[string](b, `document.documentElement.lang`)
}

// background is the page's background color as drawn.
func (b *browserSession) background() string {
	return evalJS[string](b, `getComputedStyle(document.body).backgroundColor`)
}

const (
	lightBackground = "rgb(246, 247, 249)"
	darkBackground  = "rgb(15, 17, 21)"
)

func TestConsoleLanguages(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	createUser(g, "lin", 2_500_000, "user")
	b := startBrowser(t, g)

	// the browser speaks English: so does the console
	b.open("/", `!document.getElementById('login-card').hidden`)
	if b.lang() != "en" || b.text("h-login") != "Log in" || b.text("lang-toggle") != "中文" {
		t.Fatalf("English by default: lang %q, heading %q, switch %q", b.lang(), b.text("h-login"), b.text("lang-toggle"))
	}

	// switch to Chinese: the page, its labels and the scripts' messages
	b.do(chromedp.Click(chromedp.ID("lang-toggle")))
	b.waitFor(`document.documentElement.lang === 'zh-CN' && !document.getElementById('login-card').hidden`)
	for id, want := range map[string]string{"h-login": "登录", "h-base": "API 基础地址", "lang-toggle": "English", "login-submit": "登录"} {
		if got := b.text(id); got != want {
			t.Errorf("in Chinese #%s says %q, want %q", id, got, want)
		}
	}
	if got := evalJS[string](b, `document.querySelector('label[for="login-username"]').textContent`); got != "用户名" {
		t.Errorf("the username label says %q", got)
	}
	b.screenshot("zh-login")
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), "lin"),
		chromedp.SendKeys(chromedp.ID("login-password"), "password-lin\r"))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('quota').textContent !== ''`)
	b.waitFor(`document.getElementById('tokens').textContent !== '' && document.getElementById('usage').textContent !== ''`)
	if got := b.text("h-balance"); got != "余额" {
		t.Errorf("the balance heading says %q", got)
	}
	if got := b.text("tokens"); got != "还没有密钥：请在上方创建一个。" {
		t.Errorf("the empty key list says %q", got)
	}
	if got := b.text("usage"); got != "还没有请求。" {
		t.Errorf("the empty usage list says %q", got)
	}
	if got := b.text("quota"); got != "$2.50" {
		t.Errorf("the balance shows %q", got)
	}

	// reloaded, and on another page: still Chinese
	b.do(chromedp.Reload())
	b.waitFor(`document.documentElement.lang === 'zh-CN' && !document.getElementById('dashboard').hidden`)
	b.screenshot("zh-dashboard")
	b.open("/console/models", `!document.getElementById('models-card').hidden`)
	if b.lang() != "zh-CN" || b.text("h-models") != "你可以使用的模型" {
		t.Fatalf("the models page: lang %q, heading %q", b.lang(), b.text("h-models"))
	}
	if got := evalJS[string](b, `document.querySelector('tr[data-model="demo"] td.price').innerText`); !strings.Contains(got, "每 100 万输入 tokens $1.00") {
		t.Errorf("the demo model's price reads %q", got)
	}
	b.open("/console/playground", `!document.getElementById('playground').hidden`)
	if got := b.text("send"); got != "发送" {
		t.Errorf("the playground's send button says %q", got)
	}
	// a failed single sign-on is worded in Chinese too
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`location.pathname === '/' && !!document.getElementById('login-card') && !document.getElementById('login-card').hidden`)
	b.open("/?sso_error=domain_not_allowed", `document.getElementById('sso-error').textContent !== ''`)
	if got := b.text("sso-error"); !strings.Contains(got, "邮箱域名不允许登录") {
		t.Errorf("a refused sign-in in Chinese: %q", got)
	}

	// back to English, remembered too
	b.do(chromedp.Click(chromedp.ID("lang-toggle")))
	b.waitFor(`document.documentElement.lang === 'en' && !document.getElementById('login-card').hidden`)
	b.do(chromedp.Reload())
	b.waitFor(`document.documentElement.lang === 'en' && document.getElementById('h-login').textContent === 'Log in'`)

	// with no choice saved, a browser whose first language is Chinese
	// gets Chinese
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('gateway.lang')`),
		chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			_, err := cdp.Call(ctx, tgt, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
				Source: `Object.defineProperty(navigator, 'languages', { get: () => ['zh-CN', 'en'] })`})
			return err
		}))
	b.open("/", `!document.getElementById('login-card').hidden`)
	if b.lang() != "zh-CN" || b.text("h-login") != "登录" {
		t.Fatalf("a Chinese browser with no choice saved: lang %q, heading %q", b.lang(), b.text("h-login"))
	}
}

func TestConsoleTheme(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	if got := b.background(); got != lightBackground {
		t.Fatalf("a light system gets %s", got)
	}
	if got := b.text("theme-toggle"); got != "Dark" {
		t.Fatalf("the toggle says %q", got)
	}

	// dark, chosen: kept across a reload and on the other pages
	b.do(chromedp.Click(chromedp.ID("theme-toggle")))
	b.waitFor(`document.documentElement.dataset.theme === 'dark'`)
	if got := b.background(); got != darkBackground {
		t.Fatalf("dark chosen, the page is %s", got)
	}
	b.do(chromedp.Reload())
	b.waitFor(`!document.getElementById('login-card').hidden`)
	if got := b.background(); got != darkBackground || b.text("theme-toggle") != "Light" {
		t.Fatalf("after a reload: %s, toggle %q", got, b.text("theme-toggle"))
	}
	b.screenshot("dark-login")
	b.open("/console/playground", `!document.getElementById('need-login').hidden`)
	if got := b.background(); got != darkBackground {
		t.Fatalf("the playground after choosing dark: %s", got)
	}

	// with no choice saved, the system's scheme decides; a saved choice
	// wins over it
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('gateway.theme')`),
		chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			_, err := cdp.Call(ctx, tgt, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
	b.open("/", `!document.getElementById('login-card').hidden`)
	if got := b.background(); got != darkBackground || evalJS[bool](b, `'theme' in document.documentElement.dataset`) {
		t.Fatalf("a dark system with no choice saved: %s", got)
	}
	b.do(chromedp.Click(chromedp.ID("theme-toggle")))
	b.waitFor(`document.documentElement.dataset.theme === 'light'`)
	b.do(chromedp.Reload())
	b.waitFor(`!document.getElementById('login-card').hidden`)
	if got := b.background(); got != lightBackground {
		t.Fatalf("light chosen on a dark system, after a reload: %s", got)
	}
}
