package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// Channels made at runtime: an administrator adds a channel with its
// vendor key through the admin API (or the console) and every instance
// serves it at its next request, without a reload; its key is sealed in
// the database with the gateway's secrets_key, shown only as a masked
// prefix, audited without it, and re-sealed by the rotation command.

// secretsKeyFile writes a fresh secrets_key to a file of the test's and
// returns its path; the key must never reach a log.
func secretsKeyFile(t *testing.T, name string) string {
	t.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	material := base64.StdEncoding.EncodeToString(raw)
	gatewaytest.Secret(material)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(material+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runtimeConfig is the account gateway with a secrets_key from keyFile
// ("": none) and loopback upstreams allowed, gpt-4o-mini priced and
// served by no Caddyfile channel.
func runtimeConfig(keyFile string) *caddyfile {
	c := accountConfig("off", 1000, 1000).
		option("token_cache_ttl 10m").
		option("allow_private_upstreams 127.0.0.1").
		price("gpt-4o-mini", "input 0.15", "output 0.60")
	if keyFile != "" {
		c = c.option("secrets_key {file." + keyFile + "}")
	}
	return c
}

// sdkChat asks gw for a chat completion of model with the OpenAI SDK.
func sdkChat(gw *gatewaytest.Gateway, key, model string) (*openai.ChatCompletion, error) {
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
}

type channelList struct {
	Data []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		Setup *struct {
			Source    string `json:"source"`
			KeyPrefix string `json:"key_prefix"`
			Keys      int    `json:"keys"`
			Disabled  bool   `json:"disabled"`
			BaseURL   string `json:"base_url"`
			LastTest  []struct {
				Model string `json:"model"`
				OK    bool   `json:"ok"`
			} `json:"last_test"`
		} `json:"setup"`
	} `json:"data"`
}

// TestRuntimeChannelsOnEveryInstance: on three instances, a channel added
// with its key through instance A's admin API serves B and C (the OpenAI
// SDK) without a reload; they list it as the database's with a masked
// key; disabled on C, B stops routing to it; changed on B (another key),
// A serves with the new key; deleted, it is gone everywhere. Bad input
// is refused with a 400 that changes nothing, a Caddyfile channel's name
// with a 409, and the audit log has every change without the key.
func TestRuntimeChannelsOnEveryInstance(t *testing.T) {
	keyFile := secretsKeyFile(t, "secrets.key")
	gws := gatewaytest.StartInstances(t, instances, runtimeConfig(keyFile).String(), nil)
	vendor := gatewaytest.NewFakeOpenAI(t, "sk-vendor-runtime-first-0001")
	admin := loggedIn(t, gws[0], "boss", 0, "admin")
	key := gws[0].AddUser("kim", 100_000_000)

	if _, err := sdkChat(gws[1], key, "gpt-4o-mini"); err == nil {
		t.Fatal("gpt-4o-mini served before any channel serves it")
	}
	// refusals first: each changes nothing
	for _, bad := range []struct {
		body   map[string]any
		status int
		code   string
		says   string
	}{
		{map[string]any{"name": "x", "type": "no-such-vendor", "base_url": vendor.URL, "keys": []string{"k"}, "models": []string{"gpt-4o-mini"}},
			http.StatusBadRequest, "invalid_channel", "unknown type"},
		{map[string]any{"name": "x", "type": "openai", "base_url": "http://10.1.2.3", "keys": []string{"k"}, "models": []string{"gpt-4o-mini"}},
			http.StatusBadRequest, "base_url_not_allowed", "allow_private_upstreams"},
		{map[string]any{"name": "x", "type": "openai", "base_url": vendor.URL, "models": []string{"gpt-4o-mini"}},
			http.StatusBadRequest, "invalid_channel", "key"},
		{map[string]any{"name": "x", "type": "openai", "base_url": vendor.URL, "keys": []string{"k"}},
			http.StatusBadRequest, "invalid_channel", "models"},
		{map[string]any{"name": "demo", "type": "openai", "base_url": vendor.URL, "keys": []string{"k"}, "models": []string{"gpt-4o-mini"}},
			http.StatusConflict, "channel_in_caddyfile", "Caddyfile"},
		{map[string]any{"name": "x", "type": "openai", "base_url": vendor.URL, "keys": []string{"k"}, "models": []string{"gpt-4o"}},
			http.StatusBadRequest, "model_without_price", "POST /api/admin/prices"},
	} {
		msg := admin.do(http.MethodPost, "/api/admin/channels", bad.body).apiErr(t, bad.status, bad.code)
		if !strings.Contains(msg, bad.says) {
			t.Errorf("%v: %q does not say %q", bad.body, msg, bad.says)
		}
	}
	if items, err := gws[0].Store().ListRuntime(context.Background(), ""); err != nil || len(items) != 0 {
		t.Fatalf("after refusals the database holds %d items (%v)", len(items), err)
	}

	created := admin.ok(http.MethodPost, "/api/admin/channels", map[string]any{
		"name": "runtime-east", "type": "openai", "base_url": vendor.URL, "keys": []string{vendor.Key},
		"models": []string{"gpt-4o-mini"}, "priority": 5, "response_header_timeout": "5s"})
	if bytes.Contains(created.body, []byte(vendor.Key)) {
		t.Fatalf("the answer holds the key: %s", created.body)
	}
	for i, gw := range gws {
		within(t, heard, fmt.Sprintf("the new channel served on instance %d", i), func() bool {
			resp, err := sdkChat(gw, key, "gpt-4o-mini")
			return err == nil && len(resp.Choices) == 1 && resp.Choices[0].Message.Content != ""
		})
	}
	var list channelList
	adminOn(t, gws[1]).ok(http.MethodGet, "/api/admin/channels", nil).decode(t, &list)
	found := false
	for _, ch := range list.Data {
		switch {
		case ch.Name == "demo" && (ch.Setup == nil || ch.Setup.Source != "caddyfile"):
			t.Errorf("the Caddyfile's channel: %+v", ch.Setup)
		case ch.Name == "runtime-east":
			found = true
			if ch.Setup == nil || ch.Setup.Source != "database" || ch.Setup.Keys != 1 || !strings.HasSuffix(ch.Setup.KeyPrefix, "…") ||
				len(ch.Setup.KeyPrefix) > len("sk-ven…") {
				t.Errorf("the database's channel: %+v", ch.Setup)
			}
		}
	}
	if !found {
		t.Fatalf("instance 1 does not list the channel: %+v", list)
	}

	// disabled through C: B stops serving it
	adminOn(t, gws[2]).ok(http.MethodPatch, "/api/admin/channels/runtime-east", map[string]any{"disabled": true})
	within(t, heard, "the disabled channel left on instance 1", func() bool {
		_, err := sdkChat(gws[1], key, "gpt-4o-mini")
		return err != nil
	})
	// another vendor account's key through B, and back in service: A uses it
	second := gatewaytest.NewFakeOpenAI(t, "sk-vendor-runtime-second-0002")
	adminOn(t, gws[1]).ok(http.MethodPatch, "/api/admin/channels/runtime-east", map[string]any{
		"disabled": false, "base_url": second.URL, "keys": []string{second.Key}})
	within(t, heard, "the changed channel served on instance 0 with its new key", func() bool {
		_, err := sdkChat(gws[0], key, "gpt-4o-mini")
		return err == nil && len(second.Requests()) > 0
	})
	admin.ok(http.MethodDelete, "/api/admin/channels/runtime-east", nil)
	for i, gw := range gws {
		within(t, heard, fmt.Sprintf("the deleted channel gone on instance %d", i), func() bool {
			_, err := sdkChat(gw, key, "gpt-4o-mini")
			return err != nil
		})
	}
	var audit struct {
		Data []struct {
			Action string          `json:"action"`
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
		} `json:"data"`
	}
	a := admin.ok(http.MethodGet, "/api/admin/audit?action=channel.", nil)
	a.decode(t, &audit)
	var actions []string
	for _, e := range audit.Data {
		actions = append(actions, e.Action)
	}
	if got := strings.Join(actions, " "); got != "channel.delete channel.update channel.update channel.create" {
		t.Errorf("audited %q", got)
	}
	if bytes.Contains(a.body, []byte(vendor.Key)) || bytes.Contains(a.body, []byte(second.Key)) {
		t.Errorf("the audit log holds a key: %s", a.body)
	}

	// a price made at runtime, then a channel for its model: each
	// instance bills it to the unit, and the changed price at once
	for _, bad := range []struct {
		body       map[string]any
		status     int
		code, says string
	}{
		{map[string]any{"model": "gpt-4o", "price": map[string]any{"input": -1, "output": 10}}, http.StatusBadRequest, "invalid_price", "input must not be negative"},
		{map[string]any{"model": "gpt-4o", "price": map[string]any{"inptu": 1}}, http.StatusBadRequest, "invalid_price", "inptu"},
		{map[string]any{"model": "demo", "price": map[string]any{"input": 1}}, http.StatusConflict, "price_in_caddyfile", "Caddyfile"},
	} {
		if msg := admin.do(http.MethodPost, "/api/admin/prices", bad.body).apiErr(t, bad.status, bad.code); !strings.Contains(msg, bad.says) {
			t.Errorf("%v: %q does not say %q", bad.body, msg, bad.says)
		}
	}
	admin.ok(http.MethodPost, "/api/admin/prices", map[string]any{"model": "gpt-4o", "price": map[string]any{"input": 2_500_000, "output": 10_000_000}})
	admin.ok(http.MethodPost, "/api/admin/channels", map[string]any{
		"name": "runtime-west", "type": "openai", "base_url": vendor.URL, "keys": []string{vendor.Key}, "models": []string{"gpt-4o"}})
	lee := gws[0].AddUser("lee", 100_000_000)
	rows := 0
	costs := func(want int64) {
		t.Helper()
		for i, gw := range gws {
			within(t, heard, fmt.Sprintf("gpt-4o at %d units on instance %d", want, i), func() bool {
				if _, err := sdkChat(gw, lee, "gpt-4o"); err != nil {
					return false
				}
				rows++
				got := gws[0].WaitUsage("lee", rows)
				return got[len(got)-1].Cost == want
			})
		}
	}
	// 10 prompt and 20 completion tokens at $2.50 and $10 per million
	costs(225)
	adminOn(t, gws[2]).ok(http.MethodPatch, "/api/admin/prices/gpt-4o", map[string]any{"price": map[string]any{"input": 5_000_000, "output": 20_000_000}})
	costs(450)
	var prices struct {
		Data []struct {
			Model  string          `json:"model"`
			Source string          `json:"source"`
			Price  json.RawMessage `json:"price"`
		} `json:"data"`
	}
	adminOn(t, gws[1]).ok(http.MethodGet, "/api/admin/prices", nil).decode(t, &prices)
	var seen []string
	for _, p := range prices.Data {
		seen = append(seen, p.Model+"/"+p.Source+"/"+string(p.Price))
	}
	if got := strings.Join(seen, " "); !strings.Contains(got, `gpt-4o/database/{"input":5000000,"output":20000000}`) || !strings.Contains(got, "demo/caddyfile/") {
		t.Errorf("the prices listed: %s", got)
	}

	// a plan made at runtime: refused naming an unknown model group;
	// made on A, assigned on B, in force on C
	msg := admin.do(http.MethodPost, "/api/admin/plans", map[string]any{"name": "gold", "plan": map[string]any{"models": []string{"group:nope"}}}).
		apiErr(t, http.StatusBadRequest, "invalid_plan")
	if !strings.Contains(msg, `unknown model group "nope"`) {
		t.Errorf("a plan naming an unknown model group: %q", msg)
	}
	admin.ok(http.MethodPost, "/api/admin/plans", map[string]any{"name": "gold", "plan": map[string]any{"windows": map[string]string{"daily": "0.0003"}, "models": []string{"gpt-4o"}}})
	leeUser := gws[0].User("lee")
	within(t, heard, "the plan known on instance 1", func() bool {
		return adminOn(t, gws[1]).do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/plan", leeUser.ID), map[string]any{"plan": "gold"}).status == http.StatusOK
	})
	leeOn2 := newClient(t, gws[2])
	leeOn2.login("lee")
	var self struct {
		Budget struct {
			Plan    string `json:"plan"`
			Windows []struct {
				Subject string `json:"subject"`
				Limit   int64  `json:"limit"`
			} `json:"windows"`
		} `json:"budget"`
	}
	within(t, heard, "the plan in force on instance 2", func() bool {
		leeOn2.ok(http.MethodGet, "/api/user/self", nil).decode(t, &self)
		return self.Budget.Plan == "gold" && len(self.Budget.Windows) == 1 && self.Budget.Windows[0].Limit == 300
	})

	// a database channel's failures count under it: failing before ejection
	admin.ok(http.MethodPatch, "/api/admin/channels/runtime-west", map[string]any{"base_url": "http://127.0.0.1:1"})
	if _, err := sdkChat(gws[0], key, "gpt-4o"); err == nil {
		t.Fatal("served through a channel whose upstream is down")
	}
	var states struct {
		Data []struct {
			Name           string `json:"name"`
			State          string `json:"state"`
			FailedAttempts int64  `json:"failed_attempts"`
		} `json:"data"`
	}
	admin.ok(http.MethodGet, "/api/admin/channels", nil).decode(t, &states)
	failing := false
	for _, s := range states.Data {
		if s.Name == "runtime-west" {
			failing = s.State == "failing" && s.FailedAttempts == 1
		}
	}
	if !failing {
		t.Errorf("the failing database channel is not listed as failing once: %+v", states.Data)
	}
}

// adminOn is the administrator "boss" signed in on gw.
func adminOn(t *testing.T, gw *gatewaytest.Gateway) *client {
	t.Helper()
	c := newClient(t, gw)
	c.login("boss")
	return c
}

func init() {
	gatewaytest.SQLiteOnly("TestRuntimeChannelKeysSealedAtRest", "it reads the SQLite file for the vendor key in clear; "+
		"TestRuntimeChannelsOnEveryInstance runs channels made at runtime on PostgreSQL")
}

// TestRuntimeChannelKeysSealedAtRest: on SQLite, a channel's key is not in
// the database file in clear; the channel serves again after a restart;
// the rotation command re-seals it under a new secrets_key (refusing a
// wrong old key and changing nothing then), after which the gateway
// serves it with the new key; the CLI assigns a plan made at runtime. Without a secrets_key a channel's key is
// refused, saying what to set.
func TestRuntimeChannelKeysSealedAtRest(t *testing.T) {
	oldKey := secretsKeyFile(t, "old.key")
	newKey := secretsKeyFile(t, "new.key")
	gw := gatewaytest.Start(t, runtimeConfig(oldKey).String(), nil)
	vendor := gatewaytest.NewFakeOpenAI(t, "sk-vendor-sealed-at-rest-0003")
	admin := loggedIn(t, gw, "boss", 0, "admin")
	key := gw.AddUser("kim", 100_000_000)
	admin.ok(http.MethodPost, "/api/admin/channels", map[string]any{
		"name": "sealed", "type": "openai", "base_url": vendor.URL, "keys": []string{vendor.Key}, "models": []string{"gpt-4o-mini"}})
	if _, err := sdkChat(gw, key, "gpt-4o-mini"); err != nil {
		t.Fatalf("served at once on the instance that made it: %v", err)
	}
	for _, f := range []string{gw.DBPath, gw.DBPath + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(vendor.Key)) {
			t.Fatalf("%s holds the vendor key in clear", f)
		}
	}
	gw.Restart()
	if _, err := sdkChat(gw, key, "gpt-4o-mini"); err != nil {
		t.Fatalf("after a restart: %v", err)
	}

	// tests: every model of the channel, then every channel, four at a time
	admin = adminOn(t, gw)
	admin.ok(http.MethodPatch, "/api/admin/channels/sealed", map[string]any{"models": []string{"gpt-4o-mini", "demo"}})
	var tests struct {
		Data []struct {
			Channel string `json:"channel"`
			Model   string `json:"model"`
			OK      bool   `json:"ok"`
			Cost    int64  `json:"cost"`
		} `json:"data"`
		OK, Failed int
		Cost       int64
	}
	admin.ok(http.MethodPost, "/api/admin/channels/sealed/test", map[string]any{"all": true}).decode(t, &tests)
	// 10 + 20 tokens: gpt-4o-mini at $0.15 and $0.60, demo at $1 and $2 per million
	if len(tests.Data) != 2 || tests.OK != 2 || tests.Cost != 14+50 {
		t.Fatalf("every model of sealed tested: %+v", tests)
	}
	admin.ok(http.MethodPost, "/api/admin/channels/test_all", map[string]any{}).decode(t, &tests)
	if len(tests.Data) != 3 || tests.OK != 3 {
		t.Fatalf("every channel tested: %+v", tests)
	}
	var kept channelList
	admin.ok(http.MethodGet, "/api/admin/channels", nil).decode(t, &kept)
	for _, ch := range kept.Data {
		if ch.Name == "sealed" && (ch.Setup == nil || len(ch.Setup.LastTest) != 2) {
			t.Errorf("sealed's kept tests: %+v", ch.Setup)
		}
	}

	_, errOut, err := gw.TryCLI("secrets", "rotate", "--old", "{file."+newKey+"}", "--new", "{file."+oldKey+"}")
	if err == nil || !strings.Contains(errOut, "does not open") {
		t.Fatalf("rotating from a wrong key: %v %s", err, errOut)
	}
	out := gw.CLI("secrets", "rotate", "--old", "{file."+oldKey+"}", "--new", "{file."+newKey+"}")
	if !strings.Contains(out, `"resealed": 1`) {
		t.Fatalf("rotate printed %s", out)
	}
	// the configuration follows the rotation
	gw.Reload(runtimeConfig(newKey).String(), nil)
	if _, err := sdkChat(gw, key, "gpt-4o-mini"); err != nil {
		t.Fatalf("with the new secrets_key: %v", err)
	}
	items, err := gw.Store().ListRuntime(context.Background(), store.RuntimeChannel)
	if err != nil || len(items) != 1 {
		t.Fatal(items, err)
	}
	// the CLI knows a plan made at runtime as it knows the Caddyfile's
	if _, errOut, err := gw.TryCLI("user", "plan", "--username", "kim", "--plan", "silver"); err == nil || !strings.Contains(errOut, "silver") {
		t.Fatalf("an unknown plan assigned with the CLI: %v %s", err, errOut)
	}
	admin.ok(http.MethodPost, "/api/admin/plans", map[string]any{"name": "silver", "plan": map[string]any{"windows": map[string]string{"monthly": "1"}}})
	gw.CLI("user", "plan", "--username", "kim", "--plan", "silver")

	bare := gatewaytest.Start(t, runtimeConfig("").String(), nil)
	boss := loggedIn(t, bare, "boss", 0, "admin")
	msg := boss.do(http.MethodPost, "/api/admin/channels", map[string]any{
		"name": "nokey", "type": "openai", "base_url": vendor.URL, "keys": []string{vendor.Key}, "models": []string{"gpt-4o-mini"}}).
		apiErr(t, http.StatusBadRequest, "no_secrets_key")
	if !strings.Contains(msg, "secrets_key {file./path}") {
		t.Errorf("the refusal does not say what to set: %q", msg)
	}
}

// TestConsoleAddsAChannel: in the browser, on one of two PostgreSQL
// instances, an administrator prices a model on the prices page and adds
// a channel for it with its key on the channels page (1280 px), sees it as the database's with only a masked key, tests
// it (OK, its cost), and a request through the other instance is served by
// it without a reload; at 390 px and in Chinese the page, with its form,
// does not scroll sideways, and the change form keeps the key unshown.
func TestConsoleAddsAChannel(t *testing.T) {
	keyFile := secretsKeyFile(t, "secrets.key")
	gws := gatewaytest.StartInstances(t, 2, runtimeConfig(keyFile).String(), nil)
	vendor := gatewaytest.NewFakeOpenAI(t, "sk-vendor-console-added-0004")
	key := gws[0].AddUser("kim", 100_000_000)
	b := adminBrowser(t, gws[0], "boss")
	// gpt-4o gets its price on the prices page first: a channel needs one
	b.open("/console/pricing", `document.querySelectorAll('#prices tr[data-model]').length === 2`)
	b.do(chromedp.SendKeys(chromedp.ID("pr-model"), "gpt-4o"),
		chromedp.SendKeys(chromedp.ID("pr-input"), "2.5"),
		chromedp.SendKeys(chromedp.ID("pr-output"), "10"),
		chromedp.Click(chromedp.ID("pr-submit")))
	b.waitFor(`document.querySelector('#prices tr[data-model="gpt-4o"]') !== null`)
	if row := evalJS[string](b, `document.querySelector('#prices tr[data-model="gpt-4o"]').innerText`); !strings.Contains(row, "database") ||
		!strings.Contains(row, "$2.50 per 1M input tokens") || !strings.Contains(row, "$10.00 per 1M output tokens") {
		t.Fatalf("the new price's row: %q", row)
	}
	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 1`)
	if src := evalJS[string](b, `document.querySelector('[data-setup="demo"]').innerText`); src != "from the Caddyfile" {
		t.Fatalf("the Caddyfile's channel's setup cell says %q", src)
	}
	b.do(chromedp.SendKeys(chromedp.ID("ch-name"), "console-east"),
		chromedp.SendKeys(chromedp.ID("ch-type"), "openai"),
		chromedp.SendKeys(chromedp.ID("ch-base"), vendor.URL),
		chromedp.SendKeys(chromedp.ID("ch-keys"), vendor.Key),
		chromedp.SendKeys(chromedp.ID("ch-models"), "gpt-4o"),
		chromedp.SendKeys(chromedp.ID("ch-extra"), `{"model_map": {"gpt-4o": "gpt-4o-2024-08-06"}}`),
		chromedp.Click(chromedp.ID("ch-submit")))
	b.waitFor(`document.querySelector('#channels tr[data-channel="console-east"]') !== null`)
	setup := evalJS[string](b, `document.querySelector('[data-setup="console-east"]').innerText`)
	if !strings.Contains(setup, "database") || !strings.Contains(setup, "key sk-ven…") {
		t.Fatalf("the new channel's setup cell says %q", setup)
	}
	if html := evalJS[string](b, `document.documentElement.outerHTML`); strings.Contains(html, vendor.Key) {
		t.Fatal("the page still holds the key after saving it")
	}
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Test channel console-east"]`)))
	b.waitFor(`document.querySelector('.test-result[data-channel="console-east"]').textContent.startsWith('OK')`)
	res := evalJS[string](b, `document.querySelector('.test-result[data-channel="console-east"]').textContent`)
	// the probe's 10 + 20 tokens at $2.50 and $10 per million
	if !strings.Contains(res, "HTTP 200") || !strings.Contains(res, "cost $0.000225") {
		t.Fatalf("the test says %q", res)
	}
	if reqs := vendor.Requests(); len(reqs) != 1 || reqs[0].Model != "gpt-4o-2024-08-06" {
		t.Fatalf("the upstream was asked %+v, want gpt-4o-2024-08-06 once (the model_map given as more settings)", reqs)
	}
	b.screenshot("runtime-channel-added-desktop")
	within(t, heard, "the console's channel served on the other instance", func() bool {
		resp, err := sdkChat(gws[1], key, "gpt-4o")
		return err == nil && len(resp.Choices) == 1
	})

	// the kept test shows on a fresh page; the change form shows no key
	b.do(chromedp.Evaluate[chromedp.Void](`localStorage.setItem('gateway.lang', 'zh')`))
	b.phone()
	b.open("/console/channels", `document.querySelectorAll('#channels tr[data-channel]').length === 2`)
	if kept := evalJS[string](b, `document.querySelector('.test-result[data-channel="console-east"]').textContent`); !strings.Contains(kept, "gpt-4o") {
		t.Errorf("the kept test shows as %q", kept)
	}
	if h := b.text("h-channel-form"); h != "添加渠道" {
		t.Errorf("the form's title in Chinese is %q", h)
	}
	b.do(chromedp.Click(chromedp.CSS(`button[aria-label="Edit channel console-east"]`)))
	b.waitFor(`document.getElementById('ch-name').value === 'console-east'`)
	if k := evalJS[string](b, `document.getElementById('ch-keys').value`); k != "" {
		t.Errorf("the change form shows keys %q", k)
	}
	if more := evalJS[string](b, `document.getElementById('ch-extra').value`); more != `{"model_map":{"gpt-4o":"gpt-4o-2024-08-06"}}` {
		t.Errorf("the change form's more settings: %q", more)
	}
	b.noSideScroll("the channels page with its form")
	b.screenshot("runtime-channel-edit-phone-zh")
	b.open("/console/pricing", `document.querySelectorAll('#prices tr[data-model]').length === 3`)
	if h := b.text("h-plans"); h != "套餐" {
		t.Errorf("the plans' title in Chinese is %q", h)
	}
	b.noSideScroll("the prices and plans page")
	b.screenshot("runtime-pricing-phone-zh")
	b.desktop()
}
