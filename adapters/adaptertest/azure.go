package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The Azure kit checks a family that serves OpenAI's wire from a
// resource's deployments (Azure OpenAI) against fixtures under
// <Testdata>/azure:
//
//	request/NAME.json   {"options": the module's JSON options, "op": chat,
//	                    completion or embedding, "model": the deployment,
//	                    "body": an OpenAI client's body}
//	  NAME.golden         → the request the provider builds
//	response/NAME.json  {"op", "body": the deployment's answer}
//	  NAME.golden         → the neutral answer
//	error/NAME.json     {"status", "body"}
//	  NAME.golden         → DecodeError's *adapters.Error
//
// Besides the goldens: every request goes to
// /openai/deployments/{deployment}/<operation path> with an api-version,
// the options' or the suite's default; the key travels in api-key alone
// and Authorization is not set; each operation in Refused is refused with
// a 4xx before anything is sent; every golden is checked by some fixture.

// AzureSuite describes a deployment-style family for RunAzure.
type AzureSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/azure.
	Testdata string
	// DefaultAPIVersion is the api-version sent when the options set none.
	DefaultAPIVersion string
	// Refused are the operations the family does not serve.
	Refused []adapters.Operation
}

type azureFixture struct {
	Options json.RawMessage    `json:"options"`
	Op      adapters.Operation `json:"op"`
	Model   string             `json:"model"`
	Status  int                `json:"status"`
	Body    json.RawMessage    `json:"body"`
}

// clientPaths are where an OpenAI client sends each operation.
var clientPaths = map[adapters.Operation]string{
	adapters.OpChat:       "/v1/chat/completions",
	adapters.OpCompletion: "/v1/completions",
	adapters.OpEmbedding:  "/v1/embeddings",
}

// RunAzure checks a deployment-style family's whole contract against its
// fixtures. Call it once from the family's tests.
func RunAzure(t *testing.T, s AzureSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.DefaultAPIVersion == "" {
		t.Fatal("adaptertest: AzureSuite.DefaultAPIVersion is required")
	}
	openai := family(t, "openai").Dialect
	dir := filepath.Join(s.Testdata, "azure")
	checked := map[string]bool{}
	decode := func(t *testing.T, f *azureFixture) *adapters.Request {
		t.Helper()
		path, ok := clientPaths[f.Op]
		if !ok {
			t.Fatalf("op %q: the kit knows %v", f.Op, clientPaths)
		}
		req, err := openai.DecodeRequest(f.Op, f.Body, goldentest.Post(path))
		if err != nil {
			t.Fatalf("the openai dialect refuses the fixture's body: %v", err)
		}
		return req
	}

	t.Run("refused", func(t *testing.T) {
		p := loadProvider(t, s.Name, nil)
		for _, op := range s.Refused {
			up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: "deployment"}
			_, err := p.NewRequest(context.Background(), up, &adapters.Request{Op: op, Dialect: "openai", Model: "m", Raw: []byte(`{}`)})
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
				t.Errorf("%s: got %v, want a 4xx *adapters.Error", op, err)
			}
		}
	})
	t.Run("request", func(t *testing.T) {
		eachFixture(t, filepath.Join(dir, "request"), checked, func(t *testing.T, raw []byte, golden string) {
			var f azureFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			p := loadProvider(t, s.Name, f.Options)
			up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL + "/", Key: kitKey, Model: f.Model}
			hr, err := p.NewRequest(context.Background(), up, decode(t, &f))
			if err != nil {
				t.Fatalf("NewRequest: %v", err)
			}
			checkDeployment(t, hr, &f, s.DefaultAPIVersion)
			do := &recorder{answers: []answer{{Status: 200}}}
			_, _ = do.Do(hr)
			checkKey(t, do, "api-key", kitKey)
			var out strings.Builder
			do.render(&out, kitKey)
			goldentest.Golden(t, golden, []byte(out.String()))
		})
	})
	t.Run("response", func(t *testing.T) {
		p := loadProvider(t, s.Name, nil)
		eachFixture(t, filepath.Join(dir, "response"), checked, func(t *testing.T, raw []byte, golden string) {
			var f azureFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			// decoded as for a client of another dialect, so the answer is
			// neutral; an operation only OpenAI's clients reach (embeddings)
			// as theirs, its body relayed as it is
			dialect := translated
			if f.Op == adapters.OpEmbedding {
				dialect = "openai"
			}
			req := &adapters.Request{Op: f.Op, Dialect: dialect, Model: "client-model"}
			resp, err := p.DecodeResponse(req, rawBody(f.Body))
			if err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			passthrough := resp.Raw != nil
			resp.Raw = nil
			got := goldentest.Neutral(resp)
			if passthrough {
				got = append([]byte("# the body is relayed as it is\n"), got...)
			}
			goldentest.Golden(t, golden, got)
		})
	})
	t.Run("error", func(t *testing.T) {
		checkErrors(t, filepath.Join(dir, "error"), checked, loadProvider(t, s.Name, nil).(adapters.Provider).DecodeError)
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
		uncheckedGoldens(t, checked, filepath.Join(dir, "request"), filepath.Join(dir, "response"), filepath.Join(dir, "error"))
	})
}

// checkDeployment holds a request to the deployment's path and the
// api-version, with nothing in Authorization.
func checkDeployment(t *testing.T, hr *http.Request, f *azureFixture, defaultVersion string) {
	t.Helper()
	want := "/openai/deployments/" + url.PathEscape(f.Model) + strings.TrimPrefix(clientPaths[f.Op], "/v1")
	if hr.URL.EscapedPath() != want {
		t.Errorf("path %s, want %s", hr.URL.EscapedPath(), want)
	}
	var opts struct {
		APIVersion string `json:"api_version"`
	}
	_ = json.Unmarshal(f.Options, &opts)
	version := opts.APIVersion
	if version == "" {
		version = defaultVersion
	}
	if got := hr.URL.Query().Get("api-version"); got != version {
		t.Errorf("api-version %q, want %q", got, version)
	}
	if hr.Header.Get("Authorization") != "" {
		t.Errorf("Authorization is set; the key goes in api-key")
	}
}

// loadProvider provisions the family's module with options (nil: the
// defaults), as a channel's `type <name> { ... }` does: a deployments
// family has the chat capability.
func loadProvider(t *testing.T, name string, options json.RawMessage) adapters.ChatProvider {
	t.Helper()
	if len(options) == 0 {
		options = json.RawMessage("{}")
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	mod, err := ctx.LoadModuleByID(Namespace+"."+name, options)
	if err != nil {
		t.Fatalf("loading %s.%s: %v", Namespace, name, err)
	}
	p, ok := mod.(adapters.ChatProvider)
	if !ok {
		t.Fatalf("%s.%s is no chat provider", Namespace, name)
	}
	return p
}
