package azure

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// Azure OpenAI's Batch API is OpenAI's wire at Azure's addresses:
// {base_url}/openai/files and /openai/batches with the api-version query
// and the key in api-key, lines addressed /chat/completions (no /v1), the
// model of each line the channel's deployment (a Global Batch one).

var _ adapters.BatchProvider = Adapter{}

func (a Adapter) site() openai.BatchSite {
	version := cmp.Or(a.APIVersion, DefaultAPIVersion)
	return openai.BatchSite{
		URL: func(up *adapters.Upstream, path string) string {
			return strings.TrimRight(up.BaseURL, "/") + "/openai" + path + "?" + url.Values{"api-version": {version}}.Encode()
		},
		Auth: func(hr *http.Request, up *adapters.Upstream) {
			if up.Key != "" {
				hr.Header.Set("api-key", up.Key)
			}
		},
		Endpoint: func(endpoint string) string { return strings.TrimPrefix(endpoint, "/v1") },
	}
}

// BatchDialect implements adapters.BatchProvider: OpenAI's batches.
func (Adapter) BatchDialect() string { return "openai" }

// SubmitBatch implements adapters.BatchProvider.
func (a Adapter) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	return a.site().SubmitBatch(ctx, do, up, job)
}

// PollBatch implements adapters.BatchProvider.
func (a Adapter) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	return a.site().PollBatch(ctx, do, up, id)
}

// CancelBatch implements adapters.BatchProvider.
func (a Adapter) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	return a.site().CancelBatch(ctx, do, up, id)
}

// BatchResults implements adapters.BatchProvider.
func (a Adapter) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, st *adapters.BatchState, max int64, each func(*adapters.BatchResult) error) error {
	return a.site().BatchResults(ctx, do, up, id, st, max, each)
}
