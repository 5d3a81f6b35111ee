package runtimecfg

import (
	"context"
	"time"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/engine"
)

// ChannelTester is the console's channel test: e's Probe in the account
// API's terms, priced by prices when it answered, and kept by rs
// (KeepTest; nil keeps nothing).
func ChannelTester(e *engine.Engine, prices *engine.PriceTable, rs *Runtime) func(ctx context.Context, channel, model string) (*accountapi.ChannelTest, error) {
	return func(ctx context.Context, channel, model string) (*accountapi.ChannelTest, error) {
		res, err := e.Probe(ctx, channel, model)
		if err != nil {
			return nil, err
		}
		t := channelTest(res, prices)
		rs.KeepTest(ctx, t)
		return t, nil
	}
}

// channelTest is a probe's result in the account API's terms, priced by
// prices when the upstream answered.
func channelTest(res *engine.ProbeResult, prices *engine.PriceTable) *accountapi.ChannelTest {
	t := &accountapi.ChannelTest{Channel: res.Channel, Model: res.Model, OK: res.OK, Status: res.Status,
		LatencyMS: res.Latency.Milliseconds(), Error: res.Error, Detail: res.Detail, UpstreamID: res.UpstreamID,
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, Reply: res.Reply,
		TestedAt: time.Now().UTC().Truncate(time.Second)}
	if p, ok := prices.Get(res.Model); ok && res.OK {
		t.Cost = p.Cost(res.Usage)
	}
	return t
}
