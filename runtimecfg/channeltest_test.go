package runtimecfg

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// testFamily is a chat family whose wire is a small JSON object.
type testFamily struct{}

func (testFamily) Type() string        { return "test" }
func (testFamily) WireDialect() string { return "test" }
func (testFamily) DecodeError(status int, body []byte) *adapters.Error {
	return adapters.Errorf(status, adapters.ErrAPI, "%s", body)
}
func (testFamily) NewRequest(ctx context.Context, up *adapters.Upstream, _ *adapters.Request) (*http.Request, error) {
	return adapters.NewJSONRequest(ctx, up.BaseURL+"/chat", []byte(`{}`), false)
}
func (testFamily) DecodeResponse(_ *adapters.Request, body []byte) (*adapters.Response, error) {
	var in struct{ In, Out int64 }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	return &adapters.Response{Message: adapters.Message{Parts: []adapters.Part{{Type: adapters.PartText, Text: "ok"}}},
		Usage: adapters.Usage{PromptTokens: in.In, CompletionTokens: in.Out}}, nil
}
func (testFamily) NewStreamStep(*adapters.Request) adapters.StreamStep { return nil }

// The console's channel test answers the probe in the account API's
// terms, priced at the model's price when the upstream answered.
func TestChannelTester(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Request-Id", "up-7")
		_, _ = w.Write([]byte(`{"in":1000,"out":10}`))
	}))
	defer srv.Close()
	b := engine.Bounds{Timeout: time.Second, StreamIdle: time.Second, MaxResponseBody: 1 << 20}
	e := &engine.Engine{
		Channels:    routing.NewSet([]*routing.Channel{{Name: "main", Type: "test", BaseURL: srv.URL, Keys: []string{"k"}, Models: []string{"m"}}}),
		MaxAttempts: 1, FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop(),
		Upstreams: engine.NewUpstreamTable(map[string]*engine.Upstream{"main": {Provider: testFamily{}, Client: srv.Client(), Bounds: b}}),
	}
	prices := engine.NewPriceTable(map[string]*billing.Price{"m": {Input: 2_000_000, Output: 10_000_000}})
	test := ChannelTester(e, prices, nil)
	got, err := test(context.Background(), "main", "m")
	if err != nil {
		t.Fatal(err)
	}
	if !got.OK || got.Channel != "main" || got.Model != "m" || got.Status != 200 || got.UpstreamID != "up-7" ||
		got.PromptTokens != 1000 || got.CompletionTokens != 10 || got.Reply != "ok" || got.TestedAt.IsZero() {
		t.Errorf("test = %+v", got)
	}
	if want := (&billing.Price{Input: 2_000_000, Output: 10_000_000}).Cost(adapters.Usage{PromptTokens: 1000, CompletionTokens: 10}); got.Cost != want || want == 0 {
		t.Errorf("cost = %d, want %d", got.Cost, want)
	}
	if _, err := test(context.Background(), "none", "m"); err == nil {
		t.Error("a channel that does not exist was tested")
	}
}
