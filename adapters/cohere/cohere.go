// Package cohere is the Cohere family (channel type "cohere"): Cohere's v2
// rerank API, POST {base_url}/v2/rerank with the key as a Bearer token,
// answered with each document's index and relevance score and the search
// units Cohere bills. It is a provider of rerank only: clients reach it
// through the gateway's /v1/rerank; chat and the other operations are
// refused. It registers the Caddy module gateway.adapters.cohere and must
// not import caddymodule or store.
package cohere

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "cohere"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Cohere provider. It holds no state.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.cohere",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler: the adapter takes
// no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// rerankRequest is Cohere's v2 rerank body: documents are strings.
type rerankRequest struct {
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n,omitempty"`
}

// rerankResponse is Cohere's v2 rerank answer.
type rerankResponse struct {
	ID      string `json:"id"`
	Results []struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
	} `json:"results"`
	Meta *struct {
		BilledUnits *struct {
			SearchUnits float64 `json:"search_units"`
		} `json:"billed_units"`
	} `json:"meta"`
}

// NewRequest implements adapters.RerankProvider.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Op != adapters.OpRerank || req.Rerank == nil {
		return nil, adapters.Unsupported("channel %q (cohere) serves only /v1/rerank, not %s requests: use a model of another channel", up.Channel, req.Op)
	}
	body, err := json.Marshal(rerankRequest{Model: up.Model, Query: req.Rerank.Query, Documents: req.Rerank.Documents, TopN: req.Rerank.TopN})
	if err != nil {
		return nil, err
	}
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+"/v2/rerank", body, false)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", "application/json")
	if up.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	return hr, nil
}

// DecodeRerankResponse implements adapters.RerankProvider.
func (Adapter) DecodeRerankResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	var w rerankResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decoding a Cohere rerank answer: %w", err)
	}
	resp := &adapters.Response{ID: w.ID, Rerank: make([]adapters.RerankResult, len(w.Results))}
	for i, r := range w.Results {
		resp.Rerank[i] = adapters.RerankResult{Index: r.Index, RelevanceScore: r.RelevanceScore}
	}
	if w.Meta != nil && w.Meta.BilledUnits != nil && w.Meta.BilledUnits.SearchUnits > 0 {
		// Cohere writes the count as a JSON number that may carry ".0"
		resp.Usage.SearchUnits = int64(w.Meta.BilledUnits.SearchUnits + 0.999999)
	}
	if req.Rerank != nil {
		if err := adapters.CheckRerankResults(req.Rerank, resp.Rerank); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// errorBody is Cohere's error envelope.
type errorBody struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// DecodeError implements adapters.Provider. A 401 or 402 is the channel's
// key or its account; 429 is Cohere's rate limit (its trial keys' too).
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) == nil && w.Message != "" {
		e.Message = w.Message
	} else {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	}
	if status == http.StatusUnauthorized || status == http.StatusPaymentRequired {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// UpstreamRequestID implements adapters.RequestIDReader: Cohere names a
// call by its x-trace-id.
func (Adapter) UpstreamRequestID(h http.Header) string { return h.Get("X-Trace-Id") }

// Interface guards.
var (
	_ adapters.Provider        = (*Adapter)(nil)
	_ adapters.RerankProvider  = (*Adapter)(nil)
	_ adapters.RequestIDReader = (*Adapter)(nil)
	_ caddyfile.Unmarshaler    = (*Adapter)(nil)
	_ caddy.Module             = (*Adapter)(nil)
)
