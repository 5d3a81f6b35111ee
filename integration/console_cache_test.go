package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestConsoleResponseCache: the dashboard's response cache card shows the
// hits, hit rate and money saved per model and per key, in English and
// Chinese, at 1280 px and on a phone, in one browser session.
func TestConsoleResponseCache(t *testing.T) {
	fake := gatewaytest.NewFakeOpenAI(t, "sk-fake-upstream-0001")
	g := gatewaytest.Start(t, operatorConfig().option(block("cache", "enable", "bill 0%")).String(), gatewaytest.Vars{"UP": fake.URL})
	createUser(g, "ann", 5_000_000, "user")
	key := g.AddToken("ann")
	body := []byte(`{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"hi"}]}`)
	for i, want := range []string{"miss", "hit", "hit"} {
		resp, b := g.Do(http.MethodPost, "/v1/chat/completions", key, body, nil)
		if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Cache") != want {
			t.Fatalf("request %d: %d %q %s; want a %s", i, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), b, want)
		}
	}
	rows := g.WaitUsage("ann", 3)
	saved := rows[0].Cost * 2 // each hit saved the miss's whole price
	if rows[1].Cost != 0 || rows[2].CacheSaved != rows[0].Cost || saved == 0 {
		t.Fatalf("rows %+v", rows)
	}

	b := adminBrowser(t, g, "boss")
	cells := func() []string {
		return evalJS[[]string](b, `[...document.querySelectorAll('#rcache-rows tr')].map((tr) => [...tr.children].map((td) => td.textContent).join('|'))`)
	}
	b.open("/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#rcache-rows tr').length === 2`)
	want := []string{"model|gpt-4o-mini|3|2|66.7%|" + dollarsText(saved), "key|default|3|2|66.7%|" + dollarsText(saved)}
	if got := cells(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the cache card:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b.screenshot("admin-response-cache-desktop")

	// in Chinese
	b.do(chromedp.Click(chromedp.ID("lang-toggle")))
	b.waitFor(`document.documentElement.lang === 'zh-CN' && document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#rcache-rows tr').length === 2`)
	if h := b.text("h-rcache"); h != "响应缓存" {
		t.Fatalf("the card's heading in Chinese: %q", h)
	}
	if got := cells(); len(got) != 2 || !strings.HasPrefix(got[0], "模型|gpt-4o-mini|3|2|") || !strings.HasPrefix(got[1], "密钥|default|") {
		t.Fatalf("the card in Chinese: %v", got)
	}

	// on a phone: nothing scrolls sideways
	b.phone()
	b.open("/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#rcache-rows tr').length === 2`)
	b.noSideScroll("the dashboard with the cache card")
	b.screenshot("admin-response-cache-phone")
}
