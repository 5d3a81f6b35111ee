package runtimecfg

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// A database channel's base URL must name a public address unless the
// operator allowed the host; no credentials, only http(s).
func TestRuntimeBaseURLPolicy(t *testing.T) {
	rs := &Runtime{allowNets: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, allowHosts: []string{"vllm.internal"}}
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		want string // "" allowed, else part of the refusal
	}{
		{"https://93.184.215.14", ""},
		{"http://10.9.1.2:8000", ""},
		{"http://vllm.internal:8000", ""},
		{"http://127.0.0.1:8080", "not a public address"},
		{"http://10.1.2.3", "allow_private_upstreams"},
		{"http://169.254.169.254", "not a public address"},
		{"http://[::1]:80", "not a public address"},
		{"http://[::ffff:127.0.0.1]", "not a public address"},
		{"ftp://93.184.215.14", "http://"},
		{"https://user:pw@93.184.215.14", "credentials"},
		{"https://localhost", "not a public address"},
	} {
		err := rs.checkBaseURL(ctx, c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s refused: %v", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a refusal saying %q", c.url, err, c.want)
		}
	}
}

// A price is billing's type: unknown fields, negative amounts anywhere and
// a price of nothing are refused.
func TestRuntimePriceChecks(t *testing.T) {
	for body, want := range map[string]string{
		`{"input": 150000, "output": 600000}`:                  "",
		`{"free": true}`:                                       "",
		`{"images": [{"size": "1024x1024", "price": 40000}]}`:  "",
		`{"input": -1}`:                                        "input must not be negative",
		`{"images": [{"size": "1024x1024", "price": -40000}]}`: "images[0].price must not be negative",
		`{"inptu": 1}`:                                         "inptu",
		`{}`:                                                   "charges nothing",
		`{"video_second": 10}`:                                 "max_seconds",
		``:                                                     "give it as",
		`{"input": 1, "output": 2, "tiers": [{"above": 200000, "input": 2, "output": 4}]}`:         "",
		`{"input": 1, "output": 2, "tiers": [{"above": 0, "input": 2, "output": 4}]}`:              "positive number of prompt tokens",
		`{"input": 1, "output": 2, "tiers": [{"above": 9, "input": 2}, {"above": 5, "input": 3}]}`: "must ascend",
	} {
		_, err := checkPrice(json.RawMessage(body))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s refused: %v", body, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want a refusal saying %q", body, err, want)
		}
	}
}

// What the console shows of a key is never more than a third of it.
func TestMaskedKeyPrefix(t *testing.T) {
	if got := keyPrefix([]string{"sk-proj-abcdefghijklmnop", "sk-2"}); got != "sk-pro… +1" {
		t.Errorf("prefix %q", got)
	}
	if got := maskKey("abcdef"); got != "ab…" {
		t.Errorf("a short key shows as %q", got)
	}
}

// The console's channel test is the probe's result in the account API's
// terms, priced at the model's price only when the upstream answered.
func TestChannelTestFromProbe(t *testing.T) {
	price := &billing.Price{Input: 2_000_000, Output: 10_000_000}
	prices := engine.NewPriceTable(map[string]*billing.Price{"m": price})
	usage := adapters.Usage{PromptTokens: 1000, CompletionTokens: 10}
	res := &engine.ProbeResult{Channel: "main", Model: "m", OK: true, Status: 200, Latency: 1500 * time.Millisecond,
		UpstreamID: "up-7", Usage: usage, Reply: "ok"}
	got := channelTest(res, prices)
	if got.Channel != "main" || got.Model != "m" || !got.OK || got.Status != 200 || got.LatencyMS != 1500 || got.UpstreamID != "up-7" ||
		got.PromptTokens != 1000 || got.CompletionTokens != 10 || got.Reply != "ok" || got.TestedAt.IsZero() {
		t.Errorf("test = %+v", got)
	}
	if want := price.Cost(usage); got.Cost != want || want == 0 {
		t.Errorf("cost = %d, want %d", got.Cost, want)
	}
	res.OK, res.Status, res.Error, res.Detail = false, 502, "upstream failed", "reset"
	if got := channelTest(res, prices); got.Cost != 0 || got.Error != "upstream failed" || got.Detail != "reset" {
		t.Errorf("failed test = %+v", got)
	}
	// a channel that does not exist is the probe's error
	e := &engine.Engine{Channels: routing.NewSet(nil), Upstreams: engine.NewUpstreamTable(nil)}
	if _, err := ChannelTester(e, prices, nil)(context.Background(), "none", "m"); err == nil {
		t.Error("a channel that does not exist was tested")
	}
}
