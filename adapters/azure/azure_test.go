package azure_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/azure"
)

func decoded(t *testing.T, op adapters.Operation, body string, stream bool) *adapters.Request {
	t.Helper()
	return &adapters.Request{Op: op, Dialect: "openai", Model: "gpt-4o-mini", Stream: stream, Raw: []byte(body),
		IncludeUsage: true}
}

// Each operation goes to its deployment's path with the api-version, the
// key in api-key and nothing in Authorization.
func TestNewRequest(t *testing.T) {
	tests := []struct {
		op      adapters.Operation
		adapter *azure.Adapter
		want    string
	}{
		{adapters.OpChat, &azure.Adapter{}, "https://res.openai.azure.com/openai/deployments/my%20gpt/chat/completions?api-version=" + azure.DefaultAPIVersion},
		{adapters.OpCompletion, &azure.Adapter{APIVersion: "2025-01-01-preview"}, "https://res.openai.azure.com/openai/deployments/my%20gpt/completions?api-version=2025-01-01-preview"},
		{adapters.OpEmbedding, &azure.Adapter{}, "https://res.openai.azure.com/openai/deployments/my%20gpt/embeddings?api-version=" + azure.DefaultAPIVersion},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			up := &adapters.Upstream{Channel: "az", BaseURL: "https://res.openai.azure.com/", Key: "az-key", Model: "my gpt"}
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"input":"hi","prompt":"hi"}`
			hr, err := tt.adapter.NewRequest(context.Background(), up, decoded(t, tt.op, body, false))
			if err != nil {
				t.Fatal(err)
			}
			if hr.URL.String() != tt.want || hr.Method != http.MethodPost {
				t.Errorf("%s %s, want POST %s", hr.Method, hr.URL, tt.want)
			}
			if hr.Header.Get("api-key") != "az-key" || hr.Header.Get("Authorization") != "" {
				t.Errorf("headers %v", hr.Header)
			}
			sent, _ := io.ReadAll(hr.Body)
			if !strings.Contains(string(sent), `"model":"my gpt"`) {
				t.Errorf("body %s", sent)
			}
		})
	}
}

func TestNewRequestRefusesWhatAzureDoesNotServe(t *testing.T) {
	up := &adapters.Upstream{Channel: "az", BaseURL: "https://res.openai.azure.com", Key: "k", Model: "m"}
	_, err := (&azure.Adapter{}).NewRequest(context.Background(), up, decoded(t, adapters.OpRerank, `{}`, false))
	var e *adapters.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "does not serve rerank") {
		t.Fatalf("err = %#v", err)
	}
}

func TestUpstreamRequestID(t *testing.T) {
	h := http.Header{"X-Request-Id": {"svc-1"}}
	if got := (azure.Adapter{}).UpstreamRequestID(h); got != "svc-1" {
		t.Errorf("without apim-request-id: %q", got)
	}
	h.Set("Apim-Request-Id", "apim-2")
	if got := (azure.Adapter{}).UpstreamRequestID(h); got != "apim-2" {
		t.Errorf("with apim-request-id: %q", got)
	}
}
