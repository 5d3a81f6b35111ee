package gatewaytest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FakeAzure is an Azure OpenAI resource: OpenAI's wire format (FakeOpenAI
// answers) under /openai/deployments/{deployment}/{chat/completions,
// completions,embeddings}?api-version=..., with the key in api-key. As
// Azure does, a stream opens with a chunk that carries only the prompt's
// content-filter results and no choices. It refuses a wrong api-key (401),
// a missing api-version (404) and a path outside a deployment (404), in
// Azure's error shape.
type FakeAzure struct {
	*httptest.Server
	*FakeOpenAI // what the deployments answer; its Requests keep Azure's paths
}

var _ Fake = (*FakeAzure)(nil)

// NewFakeAzure starts a fake resource that expects key in api-key.
func NewFakeAzure(t testing.TB, key string) *FakeAzure {
	Secret(key)
	inner := &FakeOpenAI{Key: key, azure: true}
	inner.b = defaultBehavior()
	f := &FakeAzure{FakeOpenAI: inner}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeAzure) BaseURL() string { return f.Server.URL }

// Close shuts the resource down.
func (f *FakeAzure) Close() { f.Server.Close() }

func azureError(w http.ResponseWriter, status int, code, msg string) {
	writeJSONStatus(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func (f *FakeAzure) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("api-key") != f.Key {
		f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone()})
		azureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
	deployment, op, _ := strings.Cut(rest, "/")
	if !ok || deployment == "" || r.URL.Query().Get("api-version") == "" {
		f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone()})
		azureError(w, http.StatusNotFound, "404", "Resource not found")
		return
	}
	// the deployment's OpenAI-shaped API, answered as FakeOpenAI answers
	f.handle(w, r, "/v1/"+op)
}
