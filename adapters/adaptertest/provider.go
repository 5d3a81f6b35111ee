package adaptertest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The provider kit checks a chat family no client speaks (Bedrock): its
// provider gets every dialect's requests translated, and its answers and
// streams are translated back to every dialect. It runs the chat kit's
// encode, response and stream checks (the same fixture names and goldens,
// under the same directories) without the decode and passthrough ones,
// which need a dialect, plus:
//
//	error/NAME.json   {"status", "body"}
//	  NAME.golden       → DecodeError's *adapters.Error
//
// A family whose streams are not SSE names its stream fixtures' extension
// and turns each fixture into the bytes its upstream sends (StreamWire),
// so a binary framing has readable fixtures. Every built request is also
// handed to Check (where the credentials went, the path).

// ProviderSuite describes a provider-only chat family for RunProvider.
type ProviderSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Testdata is the fixture directory; default "testdata".
	Testdata string
	// UpstreamModel is the model every built request asks for.
	UpstreamModel string
	// StreamExt is the stream fixtures' extension; default ".sse".
	StreamExt string
	// StreamWire turns a stream fixture into the upstream's bytes; nil:
	// the fixture is the bytes.
	StreamWire func(t testing.TB, fixture []byte) []byte
	// Check looks at every request the provider builds (key "sk-upstream"),
	// beyond its body; nil: nothing more.
	Check func(t *testing.T, hr *http.Request)
	// Refusals are requests of other dialects (Dialect is required) the
	// provider must refuse.
	Refusals []Refusal
}

// RunProvider checks a provider-only chat family's fixtures through every
// registered dialect. Call it once from the family's tests.
func RunProvider(t *testing.T, s ProviderSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.UpstreamModel == "" {
		t.Fatal("adaptertest: ProviderSuite.UpstreamModel is required")
	}
	k := &kit{s: Suite{Name: s.Name, Testdata: s.Testdata, UpstreamModel: s.UpstreamModel, Refusals: s.Refusals},
		self: family(t, s.Name), checked: map[string]bool{}, requests: map[string][]*http.Request{},
		streamExt: s.StreamExt, streamWire: s.StreamWire}
	k.all, _ = Families()
	if k.self.Chat == nil || k.self.Dialect != nil {
		t.Fatalf("%s is not a chat provider without a dialect; RunProvider checks families that are (Run checks the others)", s.Name)
	}
	for _, rf := range s.Refusals {
		if rf.Dialect == "" {
			t.Fatalf("refusal %q names no dialect: %s has none of its own", rf.Name, s.Name)
		}
	}
	t.Run("encode", k.encode)
	t.Run("requests", func(t *testing.T) { k.checkRequests(t, s.Check) })
	t.Run("response", k.response)
	t.Run("stream", k.stream)
	t.Run("cut stream", k.cutStreams)
	t.Run("error", func(t *testing.T) {
		checkErrors(t, k.path("error"), k.checked, k.self.Provider.DecodeError)
	})
	t.Run("refusals", k.refusals)
	if !t.Failed() && !*goldentest.Update {
		t.Run("unchecked goldens", func(t *testing.T) {
			k.unchecked(t)
			uncheckedGoldens(t, k.checked, k.path("error"))
		})
	}
}

// streamFixture is the upstream's bytes of a stream fixture.
func (k *kit) streamFixture(t *testing.T, path string) []byte {
	b := goldentest.Read(t, path)
	if k.streamWire != nil {
		return k.streamWire(t, b)
	}
	return b
}

func (k *kit) streamExtension() string {
	if k.streamExt != "" {
		return k.streamExt
	}
	return ".sse"
}

// checkRequests builds each encode fixture's request, streamed and not,
// for Check.
func (k *kit) checkRequests(t *testing.T, check func(*testing.T, *http.Request)) {
	if check == nil {
		return
	}
	for _, in := range k.fixtures(t, "encode", ".json") {
		_, from := source(t, in, ".json")
		d := k.find(t, from)
		for _, stream := range []bool{false, true} {
			req, err := k.decodeClient(t, d, adapters.OpChat, goldentest.Read(t, in))
			if err != nil {
				t.Fatal(err)
			}
			req.Stream = stream
			up := &adapters.Upstream{Channel: "kit", BaseURL: "https://upstream.invalid", Key: "sk-upstream", Model: k.s.UpstreamModel}
			hr, err := k.self.Chat.NewRequest(offline(), up, req)
			if err != nil {
				continue // a refusal, in the encode golden
			}
			check(t, hr)
		}
	}
}

// cutStreams feeds every stream of the family's own cut short at each
// byte: the decoder must end with an error (never a panic), or cleanly
// only once the finish reason has come.
func (k *kit) cutStreams(t *testing.T) {
	for _, in := range k.fixtures(t, "stream", k.streamExtension()) {
		if _, from := source(t, in, k.streamExtension()); from != k.self.Name {
			continue
		}
		stream := k.streamFixture(t, in)
		req := &adapters.Request{Op: adapters.OpChat, Dialect: translated, Model: "client-model", Stream: true}
		_, whole := goldentest.Drain(adapters.DecodeStream(k.self.Chat, req, bytes.NewReader(stream)))
		if whole != nil {
			continue // a stream that ends in an error ends so cut or not
		}
		for n := 0; n < len(stream); n++ {
			evs, err := goldentest.Drain(adapters.DecodeStream(k.self.Chat, req, bytes.NewReader(stream[:n])))
			if err != nil && !errors.Is(err, io.EOF) {
				continue
			}
			// the body may end cleanly after the finish reason, before the usage
			if !slices.ContainsFunc(evs, func(ev *adapters.StreamEvent) bool { return ev.Type == adapters.EventFinish }) {
				t.Errorf("%s cut at %d of %d bytes ended cleanly before its finish", in, n, len(stream))
				break
			}
		}
	}
}
