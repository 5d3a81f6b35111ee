package engine

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// family is a fake provider with no capability: the fakes below add one
// each, as a vendor's package would.
type family struct{}

func (family) Type() string                            { return "fake" }
func (family) DecodeError(int, []byte) *adapters.Error { return nil }

type chatFamily struct {
	family
	wire string
}

func (f chatFamily) WireDialect() string { return f.wire }
func (chatFamily) NewRequest(context.Context, *adapters.Upstream, *adapters.Request) (*http.Request, error) {
	return nil, nil
}
func (chatFamily) DecodeResponse(*adapters.Request, []byte) (*adapters.Response, error) {
	return nil, nil
}
func (chatFamily) NewStreamStep(*adapters.Request) adapters.StreamStep { return nil }

type rerankFamily struct{ family }

// batchFamily answers chat and runs batches of its dialect.
type batchFamily struct {
	chatFamily
}

func (f batchFamily) BatchDialect() string { return f.wire }
func (batchFamily) SubmitBatch(context.Context, adapters.Doer, *adapters.Upstream, *adapters.BatchJob) (string, error) {
	return "", nil
}
func (batchFamily) PollBatch(context.Context, adapters.Doer, *adapters.Upstream, string) (*adapters.BatchState, error) {
	return nil, nil
}
func (batchFamily) CancelBatch(context.Context, adapters.Doer, *adapters.Upstream, string) error {
	return nil
}
func (batchFamily) BatchResults(context.Context, adapters.Doer, *adapters.Upstream, string, *adapters.BatchState, int64, func(*adapters.BatchResult) error) error {
	return nil
}

func (rerankFamily) NewRequest(context.Context, *adapters.Upstream, *adapters.Request) (*http.Request, error) {
	return nil, nil
}
func (rerankFamily) DecodeRerankResponse(*adapters.Request, []byte) (*adapters.Response, error) {
	return nil, nil
}

type taskFamily struct {
	family
	callback bool
	owned    []string
}

func (f taskFamily) CallbackCapable() bool { return f.callback }
func (f taskFamily) OwnedFields() []string { return f.owned }
func (taskFamily) SubmitTask(context.Context, adapters.Doer, *adapters.Upstream, *adapters.TaskRequest) (string, error) {
	return "", nil
}
func (taskFamily) PollTask(context.Context, adapters.Doer, *adapters.Upstream, string) (*adapters.TaskState, error) {
	return nil, nil
}

// planEngine serves model "m" from one channel per family given, in the
// order given, each channel named and typed after its key.
func planEngine(fams map[string]adapters.Provider, order ...string) *Engine {
	var chans []*routing.Channel
	ups := map[string]*Upstream{}
	for i, n := range order {
		chans = append(chans, &routing.Channel{Name: n, Type: n, Keys: []string{"k"}, Models: []string{"m"}, Priority: 10 - i})
		ups[n] = &Upstream{Provider: fams[n]}
	}
	return &Engine{Channels: routing.NewSet(chans), Upstreams: NewUpstreamTable(ups), MaxAttempts: 5, Health: routing.DefaultHealthPolicy,
		FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop()}
}

func names(plan []*routing.Channel) []string {
	var out []string
	for _, ch := range plan {
		out = append(out, ch.Name)
	}
	return out
}

// A family is refused an operation it has no capability for in the words
// its own adapter used before the engine planned by capability, which
// clients and tests match on.
func TestUnservedNamesWhatTheFamilyServes(t *testing.T) {
	e := planEngine(map[string]adapters.Provider{"cohere": rerankFamily{}, "kling": taskFamily{}, "anthropic": chatFamily{}}, "cohere", "kling", "anthropic")
	byName := map[string]*routing.Channel{}
	for _, ch := range e.Plan("m", nil) {
		byName[ch.Name] = ch
	}
	cases := []struct {
		channel string
		op      adapters.Operation
		says    string
	}{
		{"cohere", adapters.OpChat, `channel "cohere" (cohere) serves only /v1/rerank, not chat requests: use a model of another channel`},
		{"kling", adapters.OpEmbedding, `channel "kling" serves video generation tasks only (POST /api/generate/submit), not embedding requests`},
		{"anthropic", adapters.OpRerank, `channel "anthropic" (anthropic) does not serve rerank requests`},
	}
	for _, c := range cases {
		ch := byName[c.channel]
		e := Unserved(ch, e.provider(ch), c.op)
		if e.Status != http.StatusBadRequest || e.Message != c.says {
			t.Errorf("%s, %s: %d %q, want 400 %q", c.channel, c.op, e.Status, e.Message, c.says)
		}
	}
}

// Each plan keeps the channels whose family has the capability, in the
// routing order.
func TestPlansKeepTheCapableFamilies(t *testing.T) {
	fams := map[string]adapters.Provider{
		"chat": chatFamily{wire: "openai"}, "rerank": rerankFamily{}, "poll": taskFamily{owned: []string{"model"}},
		"hook": taskFamily{callback: true, owned: []string{"duration"}},
	}
	e := planEngine(fams, "chat", "rerank", "poll", "hook")
	if got := names(e.RealtimePlan("m")); len(got) != 0 {
		t.Errorf("realtime plan %v, want none: no family serves it", got)
	}
	tp := e.PlanTask("m", false, nil)
	if got := names(tp.Channels); !slices.Equal(got, []string{"poll", "hook"}) || tp.PollingOnly || tp.Owned != "" {
		t.Errorf("task plan %+v, want poll and hook", tp)
	}
	tp = e.PlanTask("m", true, []string{"seed", "duration"})
	if got := names(tp.Channels); !slices.Equal(got, []string{"hook"}) || !tp.PollingOnly || tp.Owned != "duration" {
		t.Errorf("task plan with a callback %+v, want hook only, polling-only noted, duration owned", tp)
	}
	if u := Unserved(e.Plan("m", nil)[0], nil, adapters.OpChat); !strings.Contains(u.Message, "does not serve chat") {
		t.Errorf("a channel of no configured family: %q", u.Message)
	}
}

// The batch endpoints' plans: the chat-capable channels run lines locally,
// the batch-capable ones that take the batch run it at the vendor, and a
// channel of no configured family is in neither.
func TestBatchAndChatChannels(t *testing.T) {
	fams := map[string]adapters.Provider{
		"rerank": rerankFamily{}, "oai": batchFamily{chatFamily{wire: "openai"}}, "chat": chatFamily{wire: "openai"},
		"ant": batchFamily{chatFamily{wire: "anthropic"}}, "gone": nil,
	}
	e := planEngine(fams, "rerank", "oai", "chat", "ant", "gone")
	if got := names(e.ChatChannels("m")); !slices.Equal(got, []string{"oai", "chat", "ant"}) {
		t.Errorf("chat channels %v, want oai, chat, ant", got)
	}
	var asked []string
	got := names(e.BatchChannels("m", func(ch *routing.Channel, bp adapters.BatchProvider) bool {
		asked = append(asked, ch.Name)
		return bp.BatchDialect() == "anthropic"
	}))
	if !slices.Equal(got, []string{"ant"}) || !slices.Equal(asked, []string{"oai", "ant"}) {
		t.Errorf("batch channels %v (asked of %v), want ant (asked of oai and ant)", got, asked)
	}
	if e.ServesRealtime("m") {
		t.Error("ServesRealtime: true, with no Realtime family")
	}
}
