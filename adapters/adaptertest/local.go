package adaptertest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The local kit checks a chat provider that answers without a network (an
// adapters.Transporter, such as the demo model), which Run cannot: it has
// no wire of its own to hold to fixtures. Each fixture is a client's
// request, sent through the provider's transport as the relay sends it,
// under <Testdata>/local:
//
//	NAME.json    {"dialect": the client's (default openai), "path",
//	             "header": the client's headers, "body": its body}
//	  NAME.golden  → the neutral answer, or the neutral stream events and
//	               how the stream ended (ids and times blanked)
//
// Besides the goldens: the request is built and answered without a
// network; the answer is a 200 that decodes; a chat answer has usage, the
// same streamed or not, and the same text; a stream ends cleanly with a
// finish and, when asked, its usage; every golden is checked by some
// fixture.

// LocalSuite describes one local chat provider for RunLocal.
type LocalSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Provider, when set, is checked instead of the registered module (a
	// kit's own tests give it one that breaks the contract).
	Provider adapters.ChatProvider
	// Options are the module's JSON options (nil: the defaults), as a
	// channel's `type <name> { ... }` sets them.
	Options json.RawMessage
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/local.
	Testdata string
}

type localFixture struct {
	Dialect string            `json:"dialect"`
	Path    string            `json:"path"`
	Header  map[string]string `json:"header"`
	Body    json.RawMessage   `json:"body"`
}

// localAnswer is one answer of the provider, in neutral form.
type localAnswer struct {
	Response *adapters.Response `json:",omitempty"`
	// Body is an answer passed through to the client as it is
	Body   json.RawMessage         `json:",omitempty"`
	Events []*adapters.StreamEvent `json:",omitempty"`
	End    string                  `json:",omitempty"`
	text   string
	usage  adapters.Usage
}

// RunLocal checks a local chat provider against its fixtures. Call it once
// from the family's tests.
func RunLocal(t *testing.T, s LocalSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	p := s.Provider
	if p == nil {
		p = loadProvider(t, s.Name, s.Options)
	}
	tr, ok := p.(adapters.Transporter)
	if !ok {
		t.Fatalf("%s answers through the network (it is no adapters.Transporter): run its role's kit", s.Name)
	}
	dir := filepath.Join(s.Testdata, "local")
	checked := map[string]bool{}
	eachFixture(t, dir, checked, func(t *testing.T, raw []byte, golden string) {
		var f localFixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		req := localRequest(t, &f)
		a := localAsk(t, p, tr, req)
		if req.Op == adapters.OpChat {
			// billing and the reply must not depend on streaming
			// (translated from the neutral request: a passthrough body says
			// whether it streams in its own bytes)
			other := localRequest(t, &f)
			other.Dialect, other.Stream, other.IncludeUsage = translated, !req.Stream, !req.Stream
			b := localAsk(t, p, tr, other)
			if a.text != b.text || a.usage != b.usage {
				t.Errorf("streamed %v: %q %+v; streamed %v: %q %+v", req.Stream, a.text, a.usage, other.Stream, b.text, b.usage)
			}
		}
		goldentest.Golden(t, golden, goldentest.Neutral(a))
	})
	if t.Failed() {
		return
	}
	t.Run("coverage", func(t *testing.T) {
		if fixtureCount(dir) == 0 {
			t.Errorf("no fixture in %s", dir)
		}
		uncheckedGoldens(t, checked, dir)
	})
}

// localRequest decodes the fixture's request as its client's dialect does.
func localRequest(t *testing.T, f *localFixture) *adapters.Request {
	t.Helper()
	name := cmp.Or(f.Dialect, "openai")
	d := family(t, name).Dialect
	if d == nil {
		t.Fatalf("%s is no dialect", name)
	}
	header := []string{"Content-Type", "application/json"}
	for k, v := range f.Header {
		header = append(header, k, v)
	}
	r := goldentest.Post(f.Path, header...)
	op, ok := d.Route(r)
	if !ok {
		t.Fatalf("the %s dialect does not route %s", name, f.Path)
	}
	req, err := d.DecodeRequest(op, f.Body, r)
	if err != nil {
		t.Fatalf("the %s dialect refuses the fixture: %v", name, err)
	}
	return req
}

// localAsk sends req through the provider's transport and decodes the
// answer in neutral form, as for a client of another dialect.
func localAsk(t *testing.T, p adapters.ChatProvider, tr adapters.Transporter, req *adapters.Request) *localAnswer {
	t.Helper()
	up := &adapters.Upstream{Channel: "kit", BaseURL: "http://local.invalid", Model: "demo"}
	hr, err := p.NewRequest(offline(), up, req)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	// the transport answers at once; the request's own context is what a
	// client's leaving cancels
	hr = hr.WithContext(context.Background())
	resp, err := tr.Transport().RoundTrip(hr)
	if err != nil {
		t.Fatalf("the local model did not answer: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("the local model answered %d: %s", resp.StatusCode, b)
	}
	// a chat answer is read as for a client of another dialect, in neutral
	// form; the operations only OpenAI's clients reach, as theirs
	neutral := *req
	if req.Op == adapters.OpChat {
		neutral.Dialect = translated
	}
	a := &localAnswer{}
	if !req.Stream {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.DecodeResponse(&neutral, body)
		if err != nil {
			t.Fatalf("the local model's answer does not decode: %v", err)
		}
		a.usage, a.text = r.Usage, partsText(r.Message.Parts)
		if r.Raw != nil {
			a.Body = clockless(r.Raw)
		}
		r.ID, r.Created, r.Raw = "", 0, nil
		a.Response = r
	} else {
		evs, err := goldentest.Drain(adapters.DecodeStream(p, &neutral, resp.Body))
		a.End = "EOF"
		if err != nil {
			a.End = err.Error()
			t.Errorf("the stream ended with %v", err)
		}
		finished := false
		var text strings.Builder
		for _, ev := range evs {
			ev.ID, ev.Raw = "", nil
			text.WriteString(ev.Text)
			finished = finished || ev.Type == adapters.EventFinish
			if ev.Usage != nil {
				a.usage = *ev.Usage
			}
		}
		if !finished {
			t.Errorf("the stream has no finish event")
		}
		a.Events, a.text = evs, text.String()
	}
	if (!req.Stream || req.IncludeUsage) && (a.usage.PromptTokens <= 0 || (a.usage.CompletionTokens <= 0 && req.Op != adapters.OpEmbedding)) {
		t.Errorf("an answer without the usage it is billed by: %+v", a.usage)
	}
	return a
}

func partsText(parts []adapters.Part) string {
	var b bytes.Buffer
	for _, p := range parts {
		fmt.Fprint(&b, p.Text)
	}
	return b.String()
}

// stamps are the members a model fills from the clock.
var stamps = regexp.MustCompile(`"(id|created|created_at)":\s*("[^"]*"|\d+)`)

// clockless is a body with its ids and times blanked.
func clockless(b []byte) json.RawMessage {
	return stamps.ReplaceAll(b, []byte(`"$1":"-"`))
}
