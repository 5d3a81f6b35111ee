package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The rerank kit checks a provider of /v1/rerank (Cohere, Jina, an
// OpenAI-compatible rerank server) against fixtures under
// <Testdata>/rerank:
//
//	request/NAME.json   {"model": upstream model, "request": {"query",
//	                    "documents", "top_n", "return_documents"}}
//	  NAME.golden         → the request the provider builds
//	response/NAME.json  {"request": {...}, "body": the vendor's answer}
//	  NAME.golden         → the neutral ranking and usage, or the error (an
//	                      answer that ranks a document the request did not
//	                      have is refused, never relayed)
//	error/NAME.json     {"status", "body"}
//	  NAME.golden         → DecodeError's *adapters.Error
//
// Besides the goldens: the key travels only in KeyHeader; the upstream is
// never asked to send the documents back (the gateway fills them in); the
// provider serves rerank, and a rerank-only family refuses every other
// operation and does not stream; at least one response fixture is a
// refused lie; every golden is checked by some fixture.

// RerankSuite describes one rerank provider for RunRerank.
type RerankSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/rerank.
	Testdata string
	// KeyHeader is the header the key travels in.
	KeyHeader string
	// RerankOnly says the family serves nothing but rerank.
	RerankOnly bool
}

type rerankFixture struct {
	Model   string          `json:"model"`
	Request neutralRerank   `json:"request"`
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body"`
}

// neutralRerank is a RerankRequest under the names /v1/rerank gives its
// fields.
type neutralRerank struct {
	Query           string   `json:"query"`
	Documents       []string `json:"documents"`
	TopN            int      `json:"top_n"`
	ReturnDocuments bool     `json:"return_documents"`
}

func (n neutralRerank) request(model string) *adapters.Request {
	return &adapters.Request{Op: adapters.OpRerank, Dialect: "openai", Model: model, Rerank: &adapters.RerankRequest{
		Query: n.Query, Documents: n.Documents, TopN: n.TopN, ReturnDocuments: n.ReturnDocuments}}
}

// kitKey is the channel key the role kits send.
const kitKey = "sk-adaptertest-key"

// RunRerank checks a rerank provider's whole contract against its
// fixtures. Call it once from the family's tests.
func RunRerank(t *testing.T, s RerankSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.KeyHeader == "" {
		t.Fatal("adaptertest: RerankSuite.KeyHeader is required")
	}
	f := family(t, s.Name)
	p, ok := f.Provider.(adapters.RerankProvider)
	if !ok {
		t.Fatalf("%s.%s is no adapters.RerankProvider", Namespace, s.Name)
	}
	dir := filepath.Join(s.Testdata, "rerank")
	checked := map[string]bool{}
	refused := 0

	t.Run("serves", func(t *testing.T) {
		if !s.RerankOnly {
			return
		}
		if f.Chat != nil {
			t.Errorf("a rerank-only family must not have the chat capability (adapters.ChatProvider)")
		}
		up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: "m"}
		chat := &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Model: "m", Chat: &adapters.ChatRequest{}}
		_, err := p.NewRequest(context.Background(), up, chat)
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
			t.Errorf("a chat request: got %v, want a 4xx *adapters.Error", err)
		}
	})
	t.Run("request", func(t *testing.T) {
		eachFixture(t, filepath.Join(dir, "request"), checked, func(t *testing.T, raw []byte, golden string) {
			var f rerankFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: f.Model}
			hr, err := p.NewRequest(context.Background(), up, f.Request.request("client-model"))
			var out strings.Builder
			if err != nil {
				renderError(t, &out, err)
			} else {
				do := &recorder{answers: []answer{{Status: 200}}}
				_, _ = do.Do(hr)
				checkKey(t, do, s.KeyHeader, kitKey)
				for _, c := range do.calls {
					var body struct {
						ReturnDocuments bool `json:"return_documents"`
					}
					if json.Unmarshal(c.body, &body) == nil && body.ReturnDocuments {
						t.Errorf("the upstream is asked to send the documents back; the gateway fills them in")
					}
				}
				do.render(&out, kitKey)
			}
			goldentest.Golden(t, golden, []byte(out.String()))
		})
	})
	t.Run("response", func(t *testing.T) {
		eachFixture(t, filepath.Join(dir, "response"), checked, func(t *testing.T, raw []byte, golden string) {
			var f rerankFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			req := f.Request.request("client-model")
			resp, err := p.DecodeRerankResponse(req, rawBody(f.Body))
			var out strings.Builder
			if err != nil {
				refused++
				fmt.Fprintf(&out, "→ error %v\n", err)
			} else {
				if err := adapters.CheckRerankResults(req.Rerank, resp.Rerank); err != nil {
					t.Errorf("a ranking relayed that cannot be true: %v", err)
				}
				renderRanking(&out, resp)
			}
			goldentest.Golden(t, golden, []byte(out.String()))
		})
	})
	t.Run("error", func(t *testing.T) {
		checkErrors(t, filepath.Join(dir, "error"), checked, f.Provider.DecodeError)
	})
	if t.Failed() {
		return
	}
	t.Run("coverage", func(t *testing.T) {
		for _, sub := range []string{"request", "response", "error"} {
			if fixtureCount(filepath.Join(dir, sub)) == 0 {
				t.Errorf("no %s fixture in %s", sub, filepath.Join(dir, sub))
			}
		}
		if refused == 0 {
			t.Errorf("no response fixture is an answer the provider refuses (a document ranked that the request did not have)")
		}
		uncheckedGoldens(t, checked, filepath.Join(dir, "request"), filepath.Join(dir, "response"), filepath.Join(dir, "error"))
	})
}

// checkErrors checks each error fixture of dir through decode.
func checkErrors(t *testing.T, dir string, checked map[string]bool, decode func(int, []byte) *adapters.Error) {
	eachFixture(t, dir, checked, func(t *testing.T, raw []byte, golden string) {
		var f struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		e := decode(f.Status, rawBody(f.Body))
		if e == nil {
			t.Fatal("DecodeError returned nil")
		}
		if e.Status < 400 || e.Type == "" || e.Message == "" {
			t.Errorf("an error the gateway cannot report: %+v", e)
		}
		var out strings.Builder
		renderError(t, &out, e)
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

// rawBody is a fixture's body: a JSON string is raw text, anything else
// the JSON itself.
func rawBody(b json.RawMessage) []byte {
	var text string
	if json.Unmarshal(b, &text) == nil {
		return []byte(text)
	}
	return b
}

// checkKey holds the key to keyHeader: every call carries that header,
// and the key is in no other header, no URL and no body.
func checkKey(t *testing.T, do *recorder, keyHeader, key string) {
	t.Helper()
	for _, c := range do.calls {
		if c.header.Get(keyHeader) == "" {
			t.Errorf("%s %s carries no %s", c.method, c.url, keyHeader)
		}
		for name, vs := range c.header {
			if strings.EqualFold(name, keyHeader) {
				continue
			}
			for _, v := range vs {
				if strings.Contains(v, key) {
					t.Errorf("%s %s: the key travels in %s", c.method, c.url, name)
				}
			}
		}
		if strings.Contains(c.url, key) || strings.Contains(string(c.body), key) {
			t.Errorf("%s %s: the key travels in the URL or the body", c.method, c.url)
		}
	}
}

// renderRanking writes a neutral ranking one result a line (index 0
// shown, which a neutral rendering would leave out), then its usage.
func renderRanking(out *strings.Builder, resp *adapters.Response) {
	if resp.ID != "" {
		fmt.Fprintf(out, "id %s\n", resp.ID)
	}
	for _, r := range resp.Rerank {
		fmt.Fprintf(out, "document %d: %v\n", r.Index, r.RelevanceScore)
	}
	fmt.Fprintf(out, "usage: prompt_tokens %d, search_units %d\n", resp.Usage.PromptTokens, resp.Usage.SearchUnits)
}
