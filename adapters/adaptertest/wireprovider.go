package adaptertest

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// A family that is a chat provider and no dialect (an OpenAI-compatible
// vendor's preset: OpenAI's wire at its own address, with its own options
// and errors) is checked by Run against the same fixture directories but
// decode, which needs a dialect of its own:
//
//	encode/NAME.<v>.json     a client body of dialect <v> → NAME.<v>.<self>.golden;
//	                         one of its wire dialect also passes through
//	                         byte for byte but the model (and PassthroughAdds)
//	response/NAME.<self>.json → neutral, and → every dialect; to its wire
//	                         dialect byte for byte, with the same usage
//	stream/NAME.<self>.sse   the same for streams, frame by frame
//	error/NAME.json          {"status": the HTTP status, "body": the vendor's
//	                         error body} → NAME.golden, DecodeError's *Error
//
// Refusals name their Dialect, since the family has none.
func (k *kit) runProvider(t *testing.T) {
	wire := k.find(t, k.self.Chat.WireDialect())
	if wire.Dialect == nil {
		t.Fatalf("%s's wire dialect %q is no registered dialect", k.self.Name, wire.Name)
	}
	t.Run("encode", k.encode)
	t.Run("response", k.response)
	t.Run("stream", k.stream)
	t.Run("error", k.errors)
	t.Run("passthrough", func(t *testing.T) { k.providerPassthrough(t, wire) })
	t.Run("refusals", func(t *testing.T) {
		for _, rf := range k.s.Refusals {
			if rf.Dialect == "" {
				t.Fatalf("refusal %q: name its Dialect: %s has none", rf.Name, k.self.Name)
			}
		}
		k.refusals(t)
	})
	if !t.Failed() && !*goldentest.Update {
		t.Run("unchecked goldens", func(t *testing.T) {
			k.unchecked(t)
			files, _ := filepath.Glob(k.path("error", "*.golden"))
			for _, f := range files {
				if !k.checked[f] {
					t.Errorf("%s is checked by no fixture", f)
				}
			}
		})
	}
}

// The vendor's error envelopes → the *adapters.Error the relay classifies.
func (k *kit) errors(t *testing.T) {
	for _, in := range k.fixtures(t, "error", ".json") {
		t.Run(goldentest.Base(in), func(t *testing.T) {
			var f struct {
				Status int             `json:"status"`
				Body   json.RawMessage `json:"body"`
			}
			if err := json.Unmarshal(goldentest.Read(t, in), &f); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			e := k.self.Provider.DecodeError(f.Status, f.Body)
			if e == nil || e.Message == "" || e.Status < 400 {
				t.Fatalf("%s: DecodeError gave %+v", in, e)
			}
			k.golden(t, strings.TrimSuffix(in, ".json")+".golden", goldentest.Neutral(e))
		})
	}
}

// The wire dialect's clients reach the provider by passthrough.
func (k *kit) providerPassthrough(t *testing.T, wire Family) {
	t.Run("requests", func(t *testing.T) {
		n := 0
		for _, in := range k.fixtures(t, "encode", ".json") {
			if _, from := source(t, in, ".json"); from != wire.Name {
				continue
			}
			n++
			body := goldentest.Read(t, in)
			req, err := k.decodeClient(t, wire, adapters.OpChat, body)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			for _, model := range []string{req.Model, k.s.UpstreamModel} {
				up := &adapters.Upstream{Channel: "kit", BaseURL: "https://upstream.invalid", Key: "sk-upstream", Model: model}
				hr, err := k.self.Chat.NewRequest(offline(), up, req)
				if err != nil {
					t.Fatalf("%s: passthrough refused: %v", in, err)
				}
				sent, err := io.ReadAll(hr.Body)
				if err != nil {
					t.Fatal(err)
				}
				k.sameExceptModel(t, in, body, sent, model)
			}
		}
		if n == 0 {
			t.Fatalf("no encode/NAME.%s.json fixture", wire.Name)
		}
	})
	t.Run("responses", func(t *testing.T) {
		for _, in := range k.fixtures(t, "response", ".json") {
			body := goldentest.Read(t, in)
			req := &adapters.Request{Op: adapters.OpChat, Dialect: wire.Name, Model: "client-model"}
			resp, err := k.self.Chat.DecodeResponse(req, body)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if out, err := wire.Dialect.EncodeResponse(req, resp); err != nil || !bytes.Equal(out, body) {
				t.Errorf("%s: the passthrough answer changed (%v):\n%s", in, err, out)
			}
			neutral, err := k.self.Chat.DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: translated}, body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != neutral.Usage {
				t.Errorf("%s: passthrough usage %+v, translated %+v: billing must not depend on the client's dialect", in, resp.Usage, neutral.Usage)
			}
		}
	})
	t.Run("streams", func(t *testing.T) {
		for _, in := range k.fixtures(t, "stream", ".sse") {
			stream := goldentest.Read(t, in)
			req := &adapters.Request{Op: adapters.OpChat, Dialect: wire.Name, Model: "client-model", Stream: true, IncludeUsage: true}
			evs, err := goldentest.Drain(adapters.DecodeStream(k.self.Chat, req, bytes.NewReader(stream)))
			var raw []byte
			var usage *adapters.Usage
			for _, ev := range evs {
				if ev.Raw == nil {
					t.Errorf("%s: a passthrough event without the upstream's frame: %+v", in, ev)
				}
				if ev.Usage != nil {
					usage = ev.Usage
				}
				raw = append(raw, ev.Raw...)
			}
			if !bytes.HasPrefix(withoutComments(stream), raw) {
				t.Errorf("%s: the frames differ from the upstream's stream:\n%s", in, raw)
			}
			tevs, terr := goldentest.Drain(adapters.DecodeStream(k.self.Chat, &adapters.Request{Op: adapters.OpChat, Dialect: translated, Stream: true}, bytes.NewReader(stream)))
			var tusage *adapters.Usage
			for _, ev := range tevs {
				if ev.Usage != nil {
					tusage = ev.Usage
				}
			}
			if (usage == nil) != (tusage == nil) || (usage != nil && *usage != *tusage) {
				t.Errorf("%s: passthrough usage %+v, translated %+v", in, usage, tusage)
			}
			if (err == nil) != (terr == nil) {
				t.Errorf("%s: passthrough ended with %v, translated with %v", in, err, terr)
			}
		}
	})
}

// withoutComments is an SSE stream without its comment lines (a vendor's
// keep-alives), which the reader drops and nothing relays.
func withoutComments(stream []byte) []byte {
	var out []byte
	for _, event := range bytes.SplitAfter(stream, []byte("\n\n")) {
		if !bytes.HasPrefix(event, []byte(":")) {
			out = append(out, event...)
		}
	}
	return out
}
