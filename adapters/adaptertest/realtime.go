package adaptertest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The Realtime kit checks a family whose upstream serves Realtime
// sessions (adapters.RealtimeProvider, and adapters.RealtimeDialect when
// its clients open them) against fixtures under <Testdata>/realtime:
//
//	dial/NAME.json     {"base_url": the channel's, "model": the upstream
//	                   model, "path": the client's upgrade path, "header":
//	                   the client's upgrade headers}
//	  NAME.golden        → the URL and headers the upstream socket is opened
//	                     with, or the refusal
//	session/NAME.json  {"path", "header": the client's, "limits":
//	                   {"max_output_tokens", "transcription"}, "events": in
//	                   order, each {"client": event}, {"server": event} or
//	                   {"cancel": response id} (an event that is a JSON
//	                   string is sent as raw text)}
//	  NAME.golden        → the setup event, then what each event becomes:
//	                     what is relayed and what it costs, the refusal and
//	                     the error event the client gets, what a server
//	                     event means for billing, the cancel event
//
// Besides the goldens: the dial carries the channel's key in KeyHeader
// alone and none of the client's credentials (the kit adds them to every
// client request: Authorization, x-api-key, x-goog-api-key, api-key, ?key=
// and a key subprotocol), and goes to a ws:// or wss:// URL; no output cap
// (a member named in CapMembers, anywhere in the event) above the limit
// reaches the upstream, in the setup event or a relayed one; no audio is
// counted as transcribed when the limits allow no transcription; a refused
// event is a 4xx *adapters.Error whose error event carries its message;
// usage is whole (cached and audio tokens within their totals); a setup
// answer comes once, after a setup event; a cancel names its response;
// an event that awaits the session's state comes while it is unsettled;
// the dialect's subprotocols carry no key; the fixtures reach a capped
// event, a refusal, a response started and one done with usage, and the
// setup answered both ways; every golden is checked by some fixture.

// RealtimeSuite describes one Realtime family for RunRealtime.
type RealtimeSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Provider, when set, is checked instead of the registered module (a
	// kit's own tests give it one that breaks the contract).
	Provider adapters.RealtimeProvider
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/realtime.
	Testdata string
	// KeyHeader is the header the upstream socket carries the key in.
	KeyHeader string
	// CapMembers name the members of the family's client events that cap
	// a response's output tokens.
	CapMembers []string
}

type realtimeFixture struct {
	BaseURL string            `json:"base_url"`
	Model   string            `json:"model"`
	Path    string            `json:"path"`
	Header  map[string]string `json:"header"`
	Limits  struct {
		MaxOutputTokens int64 `json:"max_output_tokens"`
		Transcription   bool  `json:"transcription"`
	} `json:"limits"`
	Events []struct {
		Client json.RawMessage `json:"client"`
		Server json.RawMessage `json:"server"`
		Cancel *string         `json:"cancel"`
	} `json:"events"`
}

// clientSecret is the client's own key, which must never reach the
// upstream.
const clientSecret = "sk-adaptertest-client-secret"

// realtimeKit is one RunRealtime's state.
type realtimeKit struct {
	s       RealtimeSuite
	p       adapters.RealtimeProvider
	d       adapters.Dialect // nil when the family is no dialect
	checked map[string]bool
	// what the session fixtures reached
	reached map[string]bool
}

// RunRealtime checks a Realtime family's whole contract against its
// fixtures. Call it once from the family's tests.
func RunRealtime(t *testing.T, s RealtimeSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.KeyHeader == "" || len(s.CapMembers) == 0 {
		t.Fatal("adaptertest: RealtimeSuite.KeyHeader and CapMembers are required")
	}
	f := family(t, s.Name)
	k := &realtimeKit{s: s, p: s.Provider, d: f.Dialect, checked: map[string]bool{}, reached: map[string]bool{}}
	if k.p == nil {
		var ok bool
		if k.p, ok = f.Provider.(adapters.RealtimeProvider); !ok {
			t.Fatalf("%s.%s is no adapters.RealtimeProvider", Namespace, s.Name)
		}
	}
	t.Run("subprotocols", k.subprotocols)
	t.Run("dial", k.dials)
	t.Run("session", k.sessions)
	if !t.Failed() {
		t.Run("coverage", k.coverage)
	}
}

func (k *realtimeKit) dir(sub string) string { return filepath.Join(k.s.Testdata, "realtime", sub) }

func (k *realtimeKit) fixtures(t *testing.T, sub string, fn func(t *testing.T, f *realtimeFixture, golden string)) {
	eachFixture(t, k.dir(sub), k.checked, func(t *testing.T, raw []byte, golden string) {
		var f realtimeFixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		fn(t, &f, golden)
	})
}

// client is the fixture's upgrade request, with the client's credentials
// in every place a client puts one.
func (k *realtimeKit) client(t *testing.T, f *realtimeFixture) *http.Request {
	t.Helper()
	path := cmp.Or(f.Path, "/v1/realtime?model=client-model")
	u, err := url.Parse(path)
	if err != nil {
		t.Fatalf("path %q: %v", path, err)
	}
	q := u.Query()
	q.Set("key", clientSecret)
	u.RawQuery = q.Encode()
	r := httptest.NewRequest(http.MethodGet, u.String(), nil)
	for name, v := range f.Header {
		r.Header.Set(name, v)
	}
	r.Header.Set("Authorization", "Bearer "+clientSecret)
	for _, name := range []string{"x-api-key", "x-goog-api-key", "api-key"} {
		r.Header.Set(name, clientSecret)
	}
	protocols := "openai-insecure-api-key." + clientSecret
	if v := r.Header.Get("Sec-WebSocket-Protocol"); v != "" {
		protocols = v + ", " + protocols
	}
	r.Header.Set("Sec-WebSocket-Protocol", protocols)
	if k.d != nil {
		if op, ok := k.d.Route(r); !ok || op != adapters.OpRealtime {
			t.Fatalf("the %s dialect does not route %s to a Realtime session", k.d.Name(), path)
		}
	}
	return r
}

// subprotocols: none the gateway may answer a client with reads as a key.
func (k *realtimeKit) subprotocols(t *testing.T) {
	rd, ok := k.d.(adapters.RealtimeDialect)
	if !ok {
		return
	}
	protocols := rd.RealtimeSubprotocols()
	if len(protocols) == 0 {
		t.Errorf("RealtimeSubprotocols is empty")
	}
	for _, p := range protocols {
		r := httptest.NewRequest(http.MethodGet, "/v1/realtime", nil)
		r.Header.Set("Sec-WebSocket-Protocol", p)
		if strings.Contains(p, clientSecret) || k.d.Credential(r) != "" {
			t.Errorf("subprotocol %q carries a key", p)
		}
	}
}

func (k *realtimeKit) dials(t *testing.T) {
	k.fixtures(t, "dial", func(t *testing.T, f *realtimeFixture, golden string) {
		up := &adapters.Upstream{Channel: "kit", BaseURL: cmp.Or(f.BaseURL, BaseURL), Key: kitKey, Model: cmp.Or(f.Model, "adaptertest-model")}
		u, h, err := k.p.RealtimeDial(up, k.client(t, f))
		var out strings.Builder
		if err != nil {
			var e *adapters.Error
			if !errors.As(err, &e) {
				t.Errorf("a dial refused with %#v, not an *adapters.Error", err)
			}
			renderError(t, &out, err)
			goldentest.Golden(t, golden, []byte(out.String()))
			return
		}
		k.checkDial(t, u, h)
		fmt.Fprintf(&out, "GET %s\n", strings.ReplaceAll(u, kitKey, "<key>"))
		renderHeader(&out, h, kitKey)
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

// checkDial holds the upstream socket to the channel's key, in KeyHeader
// alone, and to none of the client's.
func (k *realtimeKit) checkDial(t *testing.T, u string, h http.Header) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "wss" && parsed.Scheme != "ws") {
		t.Errorf("the upstream socket's URL %q is no ws:// or wss:// URL", u)
	}
	if strings.Contains(u, clientSecret) || strings.Contains(u, kitKey) {
		t.Errorf("the dial URL carries a key: %s", u)
	}
	if !strings.Contains(h.Get(k.s.KeyHeader), kitKey) {
		t.Errorf("the channel's key is not in %s", k.s.KeyHeader)
	}
	for name, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, clientSecret) {
				t.Errorf("the client's credentials are copied to the upstream in %s", name)
			}
			if strings.Contains(v, kitKey) && !strings.EqualFold(name, k.s.KeyHeader) {
				t.Errorf("the channel's key travels in %s", name)
			}
		}
	}
}

func (k *realtimeKit) sessions(t *testing.T) {
	k.fixtures(t, "session", func(t *testing.T, f *realtimeFixture, golden string) {
		limits := adapters.RealtimeLimits{MaxOutputTokens: f.Limits.MaxOutputTokens, Transcription: f.Limits.Transcription}
		if limits.MaxOutputTokens <= 0 {
			t.Fatal("a session fixture needs limits.max_output_tokens")
		}
		if limits.Transcription {
			k.reached["transcription allowed"] = true
		}
		s := k.p.RealtimeSession(k.client(t, f), limits)
		var out strings.Builder
		fmt.Fprintf(&out, "limits: max_output_tokens %d, transcription %v\n", limits.MaxOutputTokens, limits.Transcription)
		setup := s.Setup()
		if setup == nil {
			out.WriteString("setup: none\n")
		} else {
			k.checkCaps(t, "the setup event", setup, limits)
			fmt.Fprintf(&out, "setup: %s\n", setup)
		}
		awaiting := setup != nil
		for _, ev := range f.Events {
			switch {
			case ev.Client != nil:
				k.clientEvent(t, &out, s, rawBody(ev.Client), limits)
			case ev.Server != nil:
				awaiting = k.serverEvent(t, &out, s, rawBody(ev.Server), awaiting)
			case ev.Cancel != nil:
				cancel := s.Cancel(*ev.Cancel)
				if !json.Valid(cancel) || !bytes.Contains(cancel, []byte(strconv.Quote(*ev.Cancel))) {
					t.Errorf("Cancel(%q) = %s, no JSON event naming the response", *ev.Cancel, cancel)
				}
				fmt.Fprintf(&out, "\ncancel %s\n  → %s\n", *ev.Cancel, cancel)
			default:
				t.Fatal(`an event is {"client": ...}, {"server": ...} or {"cancel": id}`)
			}
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

func (k *realtimeKit) clientEvent(t *testing.T, out *strings.Builder, s adapters.RealtimeSession, event []byte, limits adapters.RealtimeLimits) {
	t.Helper()
	fmt.Fprintf(out, "\nclient %s\n", short(event))
	relayed, cost, rerr := s.ClientEvent(event)
	if rerr != nil {
		k.reached["refusal"] = true
		if rerr.Status < 400 || rerr.Status > 499 || rerr.Type == "" || rerr.Message == "" {
			t.Errorf("a refusal the gateway cannot report: %+v", rerr)
		}
		var o strings.Builder
		renderError(t, &o, rerr)
		out.WriteString("  refused " + strings.TrimPrefix(o.String(), "→ error "))
		if rd, ok := k.d.(adapters.RealtimeDialect); ok {
			reply := rd.RealtimeError(rerr)
			var tree any
			if json.Unmarshal(reply, &tree) != nil || !containsString(tree, rerr.Message) {
				t.Errorf("the error event %s does not carry the refusal's message", reply)
			}
			fmt.Fprintf(out, "  → the client gets %s\n", reply)
		}
		return
	}
	if cost.AwaitState {
		select {
		case <-s.Settled():
			t.Errorf("an event awaits the session's state, which is settled")
		default:
		}
		k.reached["awaits state"] = true
		out.WriteString("  → waits for the upstream's state\n")
		return
	}
	if bytes.Equal(relayed, event) {
		out.WriteString("  → relayed as it is\n")
	} else {
		k.reached["capped"] = true
		fmt.Fprintf(out, "  → relayed %s\n", short(relayed))
	}
	k.checkCaps(t, "a relayed event", relayed, limits)
	if cost.TranscribedMillis < 0 || (cost.TranscribedMillis > 0 && !limits.Transcription) {
		t.Errorf("%d ms of audio transcribed, with transcription allowed: %v", cost.TranscribedMillis, limits.Transcription)
	}
	if cost.Adds.Text < 0 || cost.Adds.Audio < 0 || cost.Reads.Text < 0 || cost.Reads.Audio < 0 || cost.References < 0 {
		t.Errorf("a negative bound of what is read: %+v", cost)
	}
	if cost.CreatesResponse {
		out.WriteString("  creates a response\n")
		if cost.OwnInput || cost.Reads != (adapters.RealtimeInput{}) {
			fmt.Fprintf(out, "  reads up to %d text and %d audio tokens besides, own input %v, %d references\n",
				cost.Reads.Text, cost.Reads.Audio, cost.OwnInput, cost.References)
		}
	}
	if cost.Adds != (adapters.RealtimeInput{}) {
		fmt.Fprintf(out, "  adds up to %d text and %d audio tokens to the conversation\n", cost.Adds.Text, cost.Adds.Audio)
	}
	if cost.TranscribedMillis > 0 {
		k.reached["transcribed"] = true
		fmt.Fprintf(out, "  transcribes %d ms of audio\n", cost.TranscribedMillis)
	}
}

// serverEvent reads one server event; it returns whether a setup answer
// is still awaited.
func (k *realtimeKit) serverEvent(t *testing.T, out *strings.Builder, s adapters.RealtimeSession, event []byte, awaiting bool) bool {
	t.Helper()
	fmt.Fprintf(out, "\nserver %s\n", short(event))
	ev := s.ServerEvent(event)
	switch ev.Kind {
	case adapters.RealtimeOther:
		out.WriteString("  → other\n")
	case adapters.RealtimeResponseStarted:
		k.reached["started"] = true
		fmt.Fprintf(out, "  → response %s started, in the conversation %v\n", ev.ResponseID, ev.InConversation)
	case adapters.RealtimeResponseDone:
		u := ev.Usage
		if u.Known() {
			k.reached["usage"] = true
		}
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 || u.AudioPromptTokens < 0 || u.AudioCompletionTokens < 0 ||
			u.CachedTokens > u.PromptTokens || u.AudioPromptTokens > u.PromptTokens || u.AudioCompletionTokens > u.CompletionTokens {
			t.Errorf("usage that cannot be billed: %+v", u)
		}
		fmt.Fprintf(out, "  → response %s done, usage %s", ev.ResponseID, goldentest.Neutral(u))
		out.WriteString("\n")
	case adapters.RealtimeSetupDone, adapters.RealtimeSetupFailed:
		if !awaiting {
			t.Errorf("a setup answer (%d) where none was awaited", ev.Kind)
		}
		awaiting = false
		if ev.Kind == adapters.RealtimeSetupDone {
			k.reached["setup done"] = true
			out.WriteString("  → the setup is done\n")
			break
		}
		k.reached["setup failed"] = true
		if ev.Message == "" {
			t.Errorf("a failed setup without its reason")
		}
		fmt.Fprintf(out, "  → the setup failed: %s\n", ev.Message)
	default:
		t.Errorf("event kind %d is none the gateway knows", ev.Kind)
	}
	return awaiting
}

// checkCaps fails for an output cap above the limit anywhere in event.
func (k *realtimeKit) checkCaps(t *testing.T, what string, event []byte, limits adapters.RealtimeLimits) {
	t.Helper()
	var tree any
	if json.Unmarshal(event, &tree) != nil {
		return // not JSON: the upstream refuses it, at no cost
	}
	for _, c := range caps(tree, k.s.CapMembers) {
		n, err := strconv.ParseInt(string(c.value), 10, 64)
		if err != nil || n > limits.MaxOutputTokens {
			t.Errorf("%s reaches the upstream with %s %s, above the limit %d", what, c.name, c.value, limits.MaxOutputTokens)
		}
	}
}

type capValue struct {
	name  string
	value json.RawMessage
}

// caps finds every member named in names, at any depth.
func caps(v any, names []string) []capValue {
	var out []capValue
	switch x := v.(type) {
	case map[string]any:
		for key, y := range x {
			for _, n := range names {
				if key == n {
					b, _ := json.Marshal(y)
					out = append(out, capValue{key, b})
				}
			}
			out = append(out, caps(y, names)...)
		}
	case []any:
		for _, y := range x {
			out = append(out, caps(y, names)...)
		}
	}
	return out
}

func (k *realtimeKit) coverage(t *testing.T) {
	for _, what := range []string{"capped", "refusal", "started", "usage", "setup done", "setup failed"} {
		if !k.reached[what] {
			t.Errorf("no session fixture reaches %s", map[string]string{
				"capped": "a client event whose output cap is lowered", "refusal": "a refused client event",
				"started": "a response started", "usage": "a response done with its usage",
				"setup done": "the setup done", "setup failed": "the setup failed",
			}[what])
		}
	}
	if k.reached["transcription allowed"] && !k.reached["transcribed"] {
		t.Errorf("no session fixture that allows transcription has audio transcribed")
	}
	if fixtureCount(k.dir("dial")) == 0 {
		t.Errorf("no dial fixture in %s", k.dir("dial"))
	}
	uncheckedGoldens(t, k.checked, k.dir("dial"), k.dir("session"))
}

// renderHeader writes headers sorted, the key shown as <key>.
func renderHeader(out *strings.Builder, h http.Header, key string) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(out, "%s: %s\n", name, strings.ReplaceAll(strings.Join(h[name], ", "), key, "<key>"))
	}
}

// short is an event for a golden, a long one (audio) cut.
func short(event []byte) string {
	const most = 1024
	if len(event) <= most {
		return string(event)
	}
	return fmt.Sprintf("%s… (%d bytes)", event[:most], len(event))
}
