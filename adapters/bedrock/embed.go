package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Embeddings go through InvokeModel (POST /model/{modelId}/invoke) in the
// model's own body: Amazon Titan Text Embeddings (one text a call:
// {"inputText", "dimensions"} -> {"embedding", "inputTextTokenCount"}) and
// Cohere Embed on Bedrock ({"texts", "input_type"} -> {"embeddings"},
// which reports no token count: the gateway counts those inputs itself).

// embedFamily says which body an embedding model takes, "" for none known.
func embedFamily(model string) string {
	switch {
	case strings.Contains(model, "amazon.titan-embed-text"), strings.Contains(model, "amazon.titan-embed-g1-text"):
		return "titan"
	case strings.Contains(model, "cohere.embed-"):
		return "cohere"
	}
	return ""
}

type titanEmbedRequest struct {
	InputText  string `json:"inputText"`
	Dimensions *int64 `json:"dimensions,omitempty"`
}

type titanEmbedResponse struct {
	Embedding           []float32 `json:"embedding"`
	InputTextTokenCount int64     `json:"inputTextTokenCount"`
}

type cohereEmbedRequest struct {
	Texts     []string `json:"texts"`
	InputType string   `json:"input_type"`
}

type cohereEmbedResponse struct {
	Embeddings [][]float32 `json:"embeddings"`
}

// embedBody renders an embedding request for the model's family.
func embedBody(req *adapters.Request, model string) ([]byte, error) {
	e := req.Embedding
	if e == nil || len(e.Input) == 0 {
		return nil, adapters.BadRequest("the embedding request has no input")
	}
	switch embedFamily(model) {
	case "titan":
		if len(e.Input) != 1 {
			return nil, adapters.Unsupported("Bedrock model %q embeds one text per request: send the %d inputs one at a time", model, len(e.Input))
		}
		if e.Dimensions != nil && !strings.Contains(model, "-v2") {
			return nil, adapters.Unsupported("'dimensions' cannot be sent to Bedrock model %q: only Titan Text Embeddings V2 takes it", model)
		}
		return json.Marshal(titanEmbedRequest{InputText: e.Input[0], Dimensions: e.Dimensions})
	case "cohere":
		if e.Dimensions != nil {
			return nil, adapters.Unsupported("'dimensions' cannot be sent to Bedrock model %q: Cohere Embed has fixed dimensions", model)
		}
		return json.Marshal(cohereEmbedRequest{Texts: e.Input, InputType: "search_document"})
	}
	return nil, adapters.Unsupported("Bedrock model %q is not an embedding model this gateway can call: it embeds with Amazon Titan Text Embeddings and Cohere Embed", model)
}

// newEmbedRequest builds the InvokeModel call of an embedding request.
func (a Adapter) newEmbedRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	body, err := embedBody(req, up.Model)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(up.BaseURL, "/")+"/model/"+modelPath(up.Model)+"/invoke", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("channel %q: base_url: %w", up.Channel, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if err := a.authorize(ctx, hr, up.Key, body); err != nil {
		return nil, fmt.Errorf("channel %q: %w", up.Channel, err)
	}
	return hr, nil
}

// decodeEmbeddings reads an InvokeModel embedding answer, one vector per
// input; the body's shape says the family.
func decodeEmbeddings(req *adapters.Request, body []byte) (*adapters.Response, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{ID: answerID(body)}
	if _, ok := probe["embedding"]; ok {
		var w titanEmbedResponse
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, fmt.Errorf("upstream answered an invalid embedding: %w", err)
		}
		resp.Embeddings = [][]float32{w.Embedding}
		resp.Usage.PromptTokens = w.InputTextTokenCount
	} else {
		var w cohereEmbedResponse
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, fmt.Errorf("upstream answered invalid embeddings: %w", err)
		}
		resp.Embeddings = w.Embeddings
	}
	if req.Embedding != nil && len(resp.Embeddings) != len(req.Embedding.Input) {
		return nil, fmt.Errorf("upstream answered %d embeddings for %d inputs", len(resp.Embeddings), len(req.Embedding.Input))
	}
	return resp, nil
}
