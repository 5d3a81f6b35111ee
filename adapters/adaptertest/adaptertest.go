// Package adaptertest is the conformance kit of the vendor families: a
// family's tests call Run once and get its fixtures checked through every
// dialect and provider registered in the gateway.adapters namespace, as
// testing/fstest.TestFS checks a file system. A family's tests never import
// another family: the other families are found in Caddy's module registry
// (every family this project ships is registered by adapters/all) and
// loaded and provisioned as a channel loads them, options at their
// defaults.
//
// Fixtures live under the family's testdata directory, and each file's name
// says its direction (NAME is free, <v> a module name such as openai):
//
//	<v>.http                        how a client of dialect <v> sends a request:
//	                                request heads ("POST /path" then headers),
//	                                separated by blank lines, the chat one first
//	decode/NAME.json                a client body in this family's dialect
//	  NAME.neutral.golden             → the neutral request
//	  NAME.to-<p>.golden              → the body sent to every provider <p> (to
//	                                  this family's own provider: as translated
//	                                  from another dialect), or "# error: ..."
//	encode/NAME.<v>.json            a client body in another dialect <v>
//	  NAME.<v>.<self>.golden          → the body this provider sends
//	  NAME.<v>.count.golden           → the count_tokens body (Suite.CountTokens)
//	response/NAME.<v>.json          an upstream answer of provider <v>
//	  NAME.<v>.neutral.golden         → the neutral answer
//	  NAME.<v>.to-<d>.golden          → what a client of dialect <d> reads
//	stream/NAME.<v>.sse             an upstream stream of provider <v>
//	  NAME.<v>.neutral.golden         → the neutral events and how the stream ended
//	  NAME.<v>.to-<d>.golden          → what a client of dialect <d> reads
//
// For this family's own answers and streams <d> is every registered dialect
// (its own meaning the translated form); for another family's (<v> not this
// family) it is this family's dialect only. A golden that does not exist
// yet fails with a message to run go test -update, so a new family is
// checked against every existing family's fixtures, and they against it.
//
// Besides the goldens Run checks passthrough (this family's client bodies,
// answers and every stream frame go through its own provider byte for byte,
// but the model, with the same usage and upstream error as a translated
// stream, and one of its streams written with spaces as Python's json.dumps
// writes JSON), the refusal table the family supplies, and that every
// golden in those directories was checked by some fixture.
package adaptertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	_ "github.com/caddy-model-gateway/gateway/adapters/all" // every family, registered
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// Namespace is where the families register themselves.
const Namespace = "gateway.adapters"

// translated is the dialect name the kit decodes with when it wants a
// family's own upstream answer in neutral form, as for a client of another
// dialect. No family has this name.
const translated = "adaptertest"

// Suite describes one family for Run.
type Suite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Testdata is the fixture directory; default "testdata".
	Testdata string
	// UpstreamModel is the model the upstream is asked for in every built
	// request; it differs from the fixtures' own models so passthrough
	// shows that only the model changed.
	UpstreamModel string
	// CountTokens: the provider serves count_tokens, and each encode
	// fixture also has its count_tokens golden.
	CountTokens bool
	// PassthroughAdds names top-level members the provider documents that
	// it adds or sets on a passthrough body besides the model (OpenAI's
	// stream_options, asking for usage).
	PassthroughAdds []string
	// Refusals are inputs the family must refuse.
	Refusals []Refusal
}

// Refusal is a request that must be refused with Status and a message that
// contains Message. With Dialect and Provider empty this family's dialect
// must refuse to decode it. Otherwise Dialect (default this family's)
// decodes it and Provider (default this family's) must refuse to send it:
// a family lists what other dialects send that it cannot take, and what its
// own clients send that another family cannot.
type Refusal struct {
	Name     string
	Dialect  string
	Provider string
	// Op picks the client request from <dialect>.http; default chat.
	Op adapters.Operation
	// Path and Header, when Path is set, replace the request from
	// <dialect>.http (to test a missing header or a bad path).
	Path   string
	Header map[string]string
	Body   string
	Status int
	// Message is a fragment the error message must contain.
	Message string
}

// Family is one registered module, provisioned with default options.
type Family struct {
	Name     string
	Dialect  adapters.Dialect  // nil if it is no dialect
	Provider adapters.Provider // nil if it is no provider
	// Chat is the provider's chat capability, nil if it has none (a
	// rerank-only or a video family): the dialect kit checks chat only
	Chat adapters.ChatProvider
}

var (
	familiesOnce sync.Once
	families     []Family
	familiesErr  error
)

// Families loads every module in the gateway.adapters namespace, in name
// order, each provisioned as a channel's `type <name>` with no options.
func Families() ([]Family, error) {
	familiesOnce.Do(func() {
		ctx, _ := caddy.NewContext(caddy.Context{Context: context.Background()})
		// the context lives as long as the test binary: the modules hold it
		for _, info := range caddy.GetModules(Namespace) {
			name := info.ID.Name()
			mod, err := ctx.LoadModuleByID(string(info.ID), json.RawMessage("{}"))
			if err != nil {
				familiesErr = fmt.Errorf("loading %s: %w", info.ID, err)
				return
			}
			f := Family{Name: name}
			f.Dialect, _ = mod.(adapters.Dialect)
			f.Provider, _ = mod.(adapters.Provider)
			f.Chat, _ = mod.(adapters.ChatProvider)
			families = append(families, f)
		}
		sort.Slice(families, func(i, j int) bool { return families[i].Name < families[j].Name })
		if len(families) == 0 {
			familiesErr = fmt.Errorf("no module is registered in %s", Namespace)
		}
	})
	return families, familiesErr
}

// kit is one Run's state.
type kit struct {
	s        Suite
	self     Family
	all      []Family
	checked  map[string]bool // golden paths some check produced
	requests map[string][]*http.Request
	// a provider kit's stream fixtures: their extension and how they
	// become the upstream's bytes (RunProvider)
	streamExt  string
	streamWire func(testing.TB, []byte) []byte
}

func family(t testing.TB, name string) Family {
	t.Helper()
	all, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no module %s.%s is registered (is its package imported by adapters/all?)", Namespace, name)
	return Family{}
}

// Run checks a family's fixtures through every registered family. Call it
// once from the family's tests.
func Run(t *testing.T, s Suite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.UpstreamModel == "" {
		t.Fatal("adaptertest: Suite.UpstreamModel is required")
	}
	k := &kit{s: s, self: family(t, s.Name), checked: map[string]bool{}, requests: map[string][]*http.Request{}}
	k.all, _ = Families()
	if k.self.Chat == nil {
		t.Fatalf("%s is no chat provider; the kit checks families that are", s.Name)
	}
	if k.self.Dialect == nil {
		k.runProvider(t) // a provider of another family's wire (wireprovider.go)
		return
	}
	t.Run("decode", k.decode)
	t.Run("encode", k.encode)
	t.Run("response", k.response)
	t.Run("stream", k.stream)
	t.Run("passthrough", k.passthrough)
	t.Run("refusals", k.refusals)
	if !t.Failed() && !*goldentest.Update {
		t.Run("unchecked goldens", k.unchecked)
	}
}

func (k *kit) path(parts ...string) string {
	return filepath.Join(append([]string{k.s.Testdata}, parts...)...)
}

// fixtures lists a directory's inputs; none is a failure, since a check
// over no fixture checks nothing.
func (k *kit) fixtures(t *testing.T, dir, ext string) []string {
	t.Helper()
	files, _ := filepath.Glob(k.path(dir, "*"+ext))
	if len(files) == 0 {
		t.Fatalf("no fixtures %s: the kit needs at least one", k.path(dir, "*"+ext))
	}
	return files
}

// source splits NAME.<v>.ext into NAME and <v>.
func source(t *testing.T, path, ext string) (name, from string) {
	t.Helper()
	base := strings.TrimSuffix(filepath.Base(path), ext)
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		t.Fatalf("%s: name it NAME.<family>%s, <family> being the module that speaks it", path, ext)
	}
	return base[:i], base[i+1:]
}

// golden compares got with a golden file; a missing file says how to make it.
func (k *kit) golden(t *testing.T, path string, got []byte) {
	t.Helper()
	k.checked[path] = true
	if !*goldentest.Update {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s does not exist yet: run go test -update in this package to create it, then check it", path)
			return
		}
	}
	goldentest.Golden(t, path, got)
}

// clientRequest is how a client of dialect d sends an op, from <d>.http.
func (k *kit) clientRequest(t testing.TB, d Family, op adapters.Operation) *http.Request {
	t.Helper()
	for _, r := range k.clientRequests(t, d) {
		if got, ok := d.Dialect.Route(r); ok && got == op {
			return r.Clone(context.Background())
		}
	}
	t.Fatalf("%s has no request that %s routes to %s", k.path(d.Name+".http"), d.Name, op)
	return nil
}

func (k *kit) clientRequests(t testing.TB, d Family) []*http.Request {
	t.Helper()
	if rs, ok := k.requests[d.Name]; ok {
		return rs
	}
	rs, err := ReadRequests(k.path(d.Name + ".http"))
	if err != nil {
		t.Fatalf("%v (it says how a %s client sends its requests)", err, d.Name)
	}
	k.requests[d.Name] = rs
	return rs
}

// ReadRequests reads a <dialect>.http file: request heads ("METHOD /path"
// then "Name: value" lines), separated by blank lines, without bodies.
func ReadRequests(path string) ([]*http.Request, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []*http.Request
	var r *http.Request
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			r = nil
		case r == nil:
			method, target, ok := strings.Cut(line, " ")
			if !ok {
				return nil, fmt.Errorf("%s: %q is not METHOD /path", path, line)
			}
			r = httptest.NewRequest(method, strings.TrimSpace(target), nil)
			rs = append(rs, r)
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("%s: %q is not Name: value", path, line)
			}
			r.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s holds no request", path)
	}
	return rs, nil
}

func (k *kit) find(t *testing.T, name string) Family {
	t.Helper()
	for _, f := range k.all {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no family %q is registered", name)
	return Family{}
}

// upstreams are the chat providers a request can be sent to. A provider
// that answers without a network (Transporter, the demo model) has no wire
// to check; one without the chat capability (a rerank-only family, a
// video vendor) is never sent a conversation.
func (k *kit) upstreams() []Family {
	var ps []Family
	for _, f := range k.all {
		if f.Chat == nil {
			continue
		}
		if _, local := f.Provider.(adapters.Transporter); local {
			continue
		}
		ps = append(ps, f)
	}
	return ps
}

func (k *kit) dialects() []Family {
	var ds []Family
	for _, f := range k.all {
		if f.Dialect != nil {
			ds = append(ds, f)
		}
	}
	return ds
}

// decodeClient decodes a client body as dialect d receives it.
func (k *kit) decodeClient(t *testing.T, d Family, op adapters.Operation, body []byte) (*adapters.Request, error) {
	t.Helper()
	return d.Dialect.DecodeRequest(op, body, k.clientRequest(t, d, op))
}

// offline is the context requests are built with: a provider must not
// reach the network while building one, and one that tries (to fetch an
// image) fails at once and the same way every time.
func offline() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// sendBody is the body p sends for req, or its refusal (a 400: the request
// cannot be carried) as a comment line.
func (k *kit) sendBody(t *testing.T, f Family, req *adapters.Request) []byte {
	t.Helper()
	up := &adapters.Upstream{Channel: "kit", BaseURL: "https://upstream.invalid", Key: "sk-upstream", Model: k.s.UpstreamModel}
	hr, err := f.Chat.NewRequest(offline(), up, req)
	if err != nil {
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Fatalf("%s refused with %#v, want a 400 *adapters.Error", f.Name, err)
		}
		return []byte("# error: " + e.Message + "\n")
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// Client bodies in this family's dialect → neutral, and → every provider.
func (k *kit) decode(t *testing.T) {
	for _, in := range k.fixtures(t, "decode", ".json") {
		stem := strings.TrimSuffix(in, ".json")
		t.Run(filepath.Base(stem), func(t *testing.T) {
			body := goldentest.Read(t, in)
			req, err := k.decodeClient(t, k.self, adapters.OpChat, body)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			k.golden(t, stem+".neutral.golden", goldentest.Neutral(goldentest.ChatOf(req)))
			for _, p := range k.upstreams() {
				req, _ := k.decodeClient(t, k.self, adapters.OpChat, body)
				if p.Name == k.self.Name {
					req.Dialect = translated
				}
				k.golden(t, stem+".to-"+p.Name+".golden", k.sendBody(t, p, req))
			}
		})
	}
}

// Client bodies in other dialects → this provider.
func (k *kit) encode(t *testing.T) {
	for _, in := range k.fixtures(t, "encode", ".json") {
		name, from := source(t, in, ".json")
		stem := filepath.Join(filepath.Dir(in), name+"."+from)
		t.Run(name+"."+from, func(t *testing.T) {
			d := k.find(t, from)
			if d.Dialect == nil {
				t.Fatalf("%s is no dialect", from)
			}
			body := goldentest.Read(t, in)
			req, err := k.decodeClient(t, d, adapters.OpChat, body)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			k.golden(t, stem+"."+k.self.Name+".golden", k.sendBody(t, k.self, req))
			if k.s.CountTokens {
				req, _ := k.decodeClient(t, d, adapters.OpChat, body)
				req.Op = adapters.OpCountTokens
				k.golden(t, stem+".count.golden", k.sendBody(t, k.self, req))
			}
		})
	}
}

// targets are the dialects an answer of family from is checked in.
func (k *kit) targets(from string) []Family {
	if from != k.self.Name {
		return []Family{k.self}
	}
	return k.dialects()
}

// decodingDialect is the client dialect a provider decodes for when the
// answer goes to d: d itself, or for the family's own dialect a stranger,
// so the answer is translated and not passed through.
func decodingDialect(from, d string) string {
	if d == from {
		return translated
	}
	return d
}

// Upstream answers → neutral → each target dialect.
func (k *kit) response(t *testing.T) {
	for _, in := range k.fixtures(t, "response", ".json") {
		name, from := source(t, in, ".json")
		stem := strings.TrimSuffix(in, ".json")
		t.Run(name+"."+from, func(t *testing.T) {
			p := k.find(t, from)
			if p.Chat == nil {
				t.Fatalf("%s is no chat provider", from)
			}
			body := goldentest.Read(t, in)
			req := &adapters.Request{Op: adapters.OpChat, Dialect: decodingDialect(from, k.self.Name), Model: "client-model"}
			resp, err := p.Chat.DecodeResponse(req, body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Raw != nil || resp.Dialect != "" {
				t.Errorf("a translated answer kept the upstream's bytes (dialect %q)", resp.Dialect)
			}
			k.golden(t, stem+".neutral.golden", goldentest.Neutral(resp))
			for _, d := range k.targets(from) {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: decodingDialect(from, d.Name), Model: "client-model"}
				resp, err := p.Chat.DecodeResponse(req, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Dialect = d.Name
				out, err := d.Dialect.EncodeResponse(req, resp)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Created == 0 {
					out = goldentest.Stable(out) // the encoder took the time from the clock
				}
				k.golden(t, stem+".to-"+d.Name+".golden", out)
			}
		})
	}
}

// streamEnd is how a decoded stream ended, for a golden file.
type streamEnd struct {
	Events []*adapters.StreamEvent
	End    string          // "EOF" for a normal end, else the error
	Error  *adapters.Error // an upstream error event
}

// Upstream streams → neutral events → each target dialect's stream.
func (k *kit) stream(t *testing.T) {
	ext := k.streamExtension()
	for _, in := range k.fixtures(t, "stream", ext) {
		name, from := source(t, in, ext)
		stem := strings.TrimSuffix(in, ext)
		t.Run(name+"."+from, func(t *testing.T) {
			p := k.find(t, from)
			if p.Chat == nil {
				t.Fatalf("%s is no chat provider", from)
			}
			stream := k.streamFixture(t, in)
			req := &adapters.Request{Op: adapters.OpChat, Dialect: decodingDialect(from, k.self.Name), Model: "client-model", Stream: true}
			evs, err := goldentest.Drain(adapters.DecodeStream(p.Chat, req, bytes.NewReader(stream)))
			end := streamEnd{Events: evs, End: "EOF"}
			if err != nil {
				end.End = err.Error()
				errors.As(err, &end.Error)
			}
			for _, ev := range evs {
				if ev.Raw != nil || ev.Dialect != "" {
					t.Errorf("a translated event kept the upstream's frame: %+v", ev)
				}
			}
			k.golden(t, stem+".neutral.golden", goldentest.Neutral(end))
			for _, d := range k.targets(from) {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: decodingDialect(from, d.Name), Model: "client-model", Stream: true, IncludeUsage: true}
				dec := adapters.DecodeStream(p.Chat, req, bytes.NewReader(stream))
				req.Dialect = d.Name
				out, err := goldentest.RunStream(dec, d.Dialect.NewStreamEncoder(req))
				if err != nil {
					out = append(out, "# decoder error: "+err.Error()+"\n"...)
				}
				k.golden(t, stem+".to-"+d.Name+".golden", goldentest.Stable(out))
			}
		})
	}
}

// The family's refusal table, each in the caller's error shape.
func (k *kit) refusals(t *testing.T) {
	if len(k.s.Refusals) == 0 {
		t.Fatal("Suite.Refusals is empty: list what the family must refuse")
	}
	for _, rf := range k.s.Refusals {
		t.Run(rf.Name, func(t *testing.T) {
			d := k.self
			if rf.Dialect != "" {
				d = k.find(t, rf.Dialect)
			}
			op := rf.Op
			if op == "" {
				op = adapters.OpChat
			}
			var r *http.Request
			if rf.Path != "" {
				r = httptest.NewRequest(http.MethodPost, rf.Path, nil)
				for name, v := range rf.Header {
					r.Header.Set(name, v)
				}
			} else {
				r = k.clientRequest(t, d, op)
			}
			req, err := d.Dialect.DecodeRequest(op, []byte(rf.Body), r)
			if rf.Dialect != "" || rf.Provider != "" {
				if err != nil {
					t.Fatalf("%s did not decode the request: %v", d.Name, err)
				}
				p := k.self
				if rf.Provider != "" {
					p = k.find(t, rf.Provider)
				}
				_, err = p.Chat.NewRequest(offline(), &adapters.Upstream{Channel: "kit", BaseURL: "https://upstream.invalid", Model: k.s.UpstreamModel}, req)
			}
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != rf.Status || !strings.Contains(e.Message, rf.Message) {
				t.Fatalf("got %#v, want a %d *adapters.Error saying %q", err, rf.Status, rf.Message)
			}
			// the caller reads it in its own dialect's shape
			body := d.Dialect.EncodeError(e)
			var tree any
			if err := json.Unmarshal(body, &tree); err != nil || !containsString(tree, rf.Message) {
				t.Errorf("%s renders the error as %s, without %q", d.Name, body, rf.Message)
			}
			if p := d.Provider; p != nil {
				if back := p.DecodeError(e.Status, body); back == nil || !strings.Contains(back.Message, rf.Message) {
					t.Errorf("%s's own provider reads its error body back as %+v", d.Name, back)
				}
			}
		})
	}
}

func containsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case map[string]any:
		for _, y := range x {
			if containsString(y, s) {
				return true
			}
		}
	case []any:
		for _, y := range x {
			if containsString(y, s) {
				return true
			}
		}
	}
	return false
}

// Every golden in the kit's directories was produced by a check: a golden
// no fixture reaches any more is stale and must be removed or renamed.
func (k *kit) unchecked(t *testing.T) {
	for _, dir := range []string{"decode", "encode", "response", "stream"} {
		files, _ := filepath.Glob(k.path(dir, "*.golden"))
		for _, f := range files {
			if !k.checked[f] {
				t.Errorf("%s is checked by no fixture: remove it, or rename it after the direction it shows", f)
			}
		}
	}
}
