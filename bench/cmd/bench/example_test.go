package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The like-for-like site is Caddyfile.example's own: its log block and its
// routes, read from the file, so an edit there moves the headline.
func TestExampleSiteIsTheExamples(t *testing.T) {
	site, err := readExampleSite(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gateway_auth", "gateway_relay", "gateway_account", "gateway_console", "gateway_tasks", "route /livez"} {
		if !strings.Contains(site.body, want) {
			t.Errorf("the example's site lacks %q:\n%s", want, site.body)
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(site.log), "log {") || !strings.Contains(site.log, "format filter") ||
		!strings.HasSuffix(site.log, "}") || !strings.Contains(site.body, site.log) {
		t.Errorf("log block:\n%s", site.log)
	}
	if strings.Contains(site.body, "GATEWAY_ADDR") {
		t.Errorf("the address line is part of the body:\n%s", site.body)
	}
	if _, err := parseExampleSite("{\n\tadmin off\n}\n"); err == nil {
		t.Error("a file with no site block parsed")
	}
	if _, err := parseExampleSite("{\n}\n:8080 {\n\treverse_proxy x\n}\n"); err == nil {
		t.Error("a site with no log block parsed")
	}
}

// The headline table holds the like-for-like figures, judged by issue 21's
// bar on gateway_example / reverse_proxy_log; the second table does not
// repeat them.
func TestHeadline(t *testing.T) {
	r := &report{}
	r.addLike("c50 throughput", "req/s", map[string]float64{proxyLogged: 1000, gatewayExample: 940}, ratioAtLeast(0.95))
	r.addLike("stream c1 first event p50", "ms", map[string]float64{proxyLogged: 0.5, gatewayExample: 0.55}, aboveProxyAtMost(0.1, "≤ rp + 0.1 ms"))
	r.add("c50 throughput", "req/s", map[string]float64{proxy: 1000, gateway: 990}, ratioAtLeast(0.85))
	if f := r.Figures[0]; f.Pass == nil || *f.Pass || *f.Ratio != 0.94 {
		t.Errorf("like figure: pass %v ratio %v", f.Pass, f.Ratio)
	}
	if f := r.Figures[1]; f.Pass == nil || !*f.Pass {
		t.Errorf("first event 0.05 ms above: %v", f.Pass)
	}
	var b strings.Builder
	r.printTable(&b)
	out := b.String()
	head, rest, ok := strings.Cut(out, "Without access logs")
	if !ok || !strings.Contains(head, "0.94×") || !strings.Contains(head, "gateway (example)") || strings.Contains(rest, "0.94×") || !strings.Contains(rest, "0.99×") {
		t.Errorf("table:\n%s", out)
	}
}
