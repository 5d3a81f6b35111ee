package adaptertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// Passthrough: this family's own client bodies, answers and streams
// through its own provider.
func (k *kit) passthrough(t *testing.T) {
	if wire := k.self.Chat.WireDialect(); wire != k.self.Name {
		t.Fatalf("the provider's wire dialect is %q, not its own dialect %q", wire, k.self.Name)
	}
	t.Run("requests", func(t *testing.T) {
		for _, in := range k.fixtures(t, "decode", ".json") {
			body := goldentest.Read(t, in)
			req, err := k.decodeClient(t, k.self, adapters.OpChat, body)
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
	})
	t.Run("responses", func(t *testing.T) {
		n := 0
		for _, in := range k.fixtures(t, "response", ".json") {
			if _, from := source(t, in, ".json"); from != k.self.Name {
				continue
			}
			n++
			body := goldentest.Read(t, in)
			req := &adapters.Request{Op: adapters.OpChat, Dialect: k.self.Name, Model: "client-model"}
			resp, err := k.self.Chat.DecodeResponse(req, body)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if resp.Dialect != k.self.Name || !bytes.Equal(resp.Raw, body) {
				t.Errorf("%s: the passthrough answer does not carry the upstream's bytes", in)
			}
			if out, err := k.self.Dialect.EncodeResponse(req, resp); err != nil || !bytes.Equal(out, body) {
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
		if n == 0 {
			t.Fatalf("no response/NAME.%s.json fixture", k.self.Name)
		}
	})
	t.Run("streams", func(t *testing.T) {
		n, spaced := 0, false
		for _, in := range k.fixtures(t, "stream", ".sse") {
			if _, from := source(t, in, ".sse"); from != k.self.Name {
				continue
			}
			n++
			k.passthroughStream(t, in)
			stream := goldentest.Read(t, in)
			spaced = spaced || bytes.Contains(stream, []byte(`": `)) && bytes.Contains(stream, []byte(`, "`))
		}
		if n == 0 {
			t.Fatalf("no stream/NAME.%s.sse fixture", k.self.Name)
		}
		// usage and errors must be found however the upstream spaces its JSON
		if !spaced {
			t.Errorf("no stream/NAME.%s.sse fixture written with spaces, as Python's json.dumps writes JSON", k.self.Name)
		}
	})
}

func (k *kit) passthroughStream(t *testing.T, in string) {
	t.Helper()
	stream := goldentest.Read(t, in)
	req := &adapters.Request{Op: adapters.OpChat, Dialect: k.self.Name, Model: "client-model", Stream: true, IncludeUsage: true}
	pdec := adapters.DecodeStream(k.self.Chat, req, bytes.NewReader(stream))
	evs, err := goldentest.Drain(pdec)
	enc := k.self.Dialect.NewStreamEncoder(req)
	var raw, out []byte
	var usage *adapters.Usage
	for _, ev := range evs {
		if ev.Dialect != k.self.Name || ev.Raw == nil {
			t.Errorf("%s: a passthrough event without the upstream's frame: %+v", in, ev)
		}
		if ev.Usage != nil {
			usage = ev.Usage
		}
		raw = append(raw, ev.Raw...)
		out = enc.Encode(out, ev)
	}
	if !bytes.Equal(out, raw) {
		t.Errorf("%s: the client got other bytes than the upstream's frames:\n%s", in, out)
	}
	if !bytes.HasPrefix(stream, raw) {
		t.Errorf("%s: the frames differ from the upstream's stream:\n%s", in, raw)
	}
	if err == nil {
		if out = enc.Finish(out); !bytes.Equal(out, stream) {
			t.Errorf("%s: a complete passthrough stream changed:\n%s", in, out)
		}
	}
	// the usage billed is the same whether the stream was translated
	tdec := adapters.DecodeStream(k.self.Chat, &adapters.Request{Op: adapters.OpChat, Dialect: translated, Stream: true}, bytes.NewReader(stream))
	tevs, terr := goldentest.Drain(tdec)
	// and so is an upstream's error event, however its JSON is spaced
	var pe, te *adapters.Error
	errors.As(err, &pe)
	if errors.As(terr, &te) && (pe == nil || pe.Status != te.Status || pe.Message != te.Message) {
		t.Errorf("%s: passthrough ended with %v, translated with the upstream's error %v", in, err, terr)
	}
	var tusage *adapters.Usage
	for _, ev := range tevs {
		if ev.Usage != nil {
			tusage = ev.Usage
		}
	}
	// a stream cut before its usage is billed the usage known so far
	if err != nil && usage == nil {
		usage = pdec.UsageSoFar()
	}
	if terr != nil && tusage == nil {
		tusage = tdec.UsageSoFar()
	}
	if (usage == nil) != (tusage == nil) || (usage != nil && *usage != *tusage) {
		t.Errorf("%s: passthrough usage %+v, translated %+v", in, usage, tusage)
	}
}

// sameExceptModel checks that every top-level member but the model (and
// the members the provider documents that it adds) kept its bytes, and
// that a body nothing had to change in is the very same bytes.
func (k *kit) sameExceptModel(t *testing.T, in string, body, sent []byte, model string) {
	t.Helper()
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	if err := json.Unmarshal(sent, &b); err != nil {
		t.Fatalf("%s: the upstream body is no JSON object: %v", in, err)
	}
	changed := false
	for key, v := range a {
		switch {
		case key == "model":
			if string(b[key]) != `"`+model+`"` {
				t.Errorf("%s: model %s, want %q", in, b[key], model)
			}
			changed = changed || !bytes.Equal(v, b[key])
		case slices.Contains(k.s.PassthroughAdds, key):
			changed = changed || !bytes.Equal(v, b[key])
		case !bytes.Equal(v, b[key]):
			t.Errorf("%s: member %s changed:\n%s\n%s", in, key, v, b[key])
		}
	}
	for key := range b {
		if _, ok := a[key]; !ok {
			if !slices.Contains(k.s.PassthroughAdds, key) {
				t.Errorf("%s: member %s added", in, key)
			}
			changed = true
		}
	}
	if !changed && !bytes.Equal(body, sent) {
		t.Errorf("%s: nothing had to change, but the bytes did:\n%s", in, sent)
	}
}
