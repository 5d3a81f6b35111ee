package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// MaxRerankDocuments bounds the documents of one rerank request, as the
// rerank APIs do (Cohere recommends at most 1,000 a request).
const MaxRerankDocuments = 1000

// RerankRequest asks for documents ordered by relevance to a query.
type RerankRequest struct {
	Query     string
	Documents []string
	// TopN is how many results to return, the most relevant first; 0
	// means all of them.
	TopN int
	// ReturnDocuments asks for each result's text beside its index. The
	// gateway fills it in from the request, so upstreams are never asked
	// to send documents back.
	ReturnDocuments bool
}

// RerankResult is one document's place in a ranking.
type RerankResult struct {
	Index          int // the document's position in the request
	RelevanceScore float64
}

// CheckRerankResults refuses a ranking that names a document the request
// did not have, or more results than it asked for: an upstream answer that
// cannot be true is not relayed.
func CheckRerankResults(req *RerankRequest, results []RerankResult) error {
	want := len(req.Documents)
	if req.TopN > 0 {
		want = min(want, req.TopN)
	}
	if len(results) > want {
		return Errorf(http.StatusBadGateway, ErrAPI, "the upstream returned %d rerank results for %d documents (top_n %d)", len(results), len(req.Documents), req.TopN)
	}
	for _, r := range results {
		if r.Index < 0 || r.Index >= len(req.Documents) {
			return Errorf(http.StatusBadGateway, ErrAPI, "the upstream ranked document %d of %d", r.Index, len(req.Documents))
		}
	}
	return nil
}

// The widely used rerank shape (Jina's, which vLLM, Infinity, TEI and
// other self-hosted servers speak too): what the gateway's /v1/rerank
// takes and answers, and what OpenAI-compatible rerank servers are sent.

// RerankBody is the request body of the common rerank shape.
type RerankBody struct {
	Model           string   `json:"model"`
	Query           string   `json:"query"`
	Documents       []string `json:"documents"`
	TopN            int      `json:"top_n,omitempty"`
	ReturnDocuments bool     `json:"return_documents"`
}

// NewRerankBody is the common-shape body asking model for req's ranking,
// without the documents echoed back (the gateway fills them in).
func NewRerankBody(req *RerankRequest, model string) RerankBody {
	return RerankBody{Model: model, Query: req.Query, Documents: req.Documents, TopN: req.TopN}
}

// NewRerankRequest posts req in the common shape to {base}/v1/rerank with
// the channel's key as a Bearer token, which is what Jina and
// OpenAI-compatible rerank servers take.
func NewRerankRequest(ctx context.Context, up *Upstream, req *RerankRequest) (*http.Request, error) {
	body, err := json.Marshal(NewRerankBody(req, up.Model))
	if err != nil {
		return nil, err
	}
	hr, err := NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+"/v1/rerank", body, false)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	return hr, nil
}

// RerankAnswer is the answer of the common rerank shape.
type RerankAnswer struct {
	ID      string              `json:"id,omitempty"`
	Model   string              `json:"model,omitempty"`
	Results []RerankAnswerEntry `json:"results"`
	Usage   *RerankUsage        `json:"usage,omitempty"`
}

// RerankAnswerEntry is one result of the common shape.
type RerankAnswerEntry struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *RerankDocument `json:"document,omitempty"`
}

// RerankDocument is a document as the common shape writes it.
type RerankDocument struct {
	Text string `json:"text"`
}

// RerankUsage is the common shape's usage: tokens, or the search units of
// an upstream that bills by search.
type RerankUsage struct {
	PromptTokens int64 `json:"prompt_tokens,omitempty"`
	TotalTokens  int64 `json:"total_tokens"`
	SearchUnits  int64 `json:"search_units,omitempty"`
}

// DecodeRerankAnswer reads a common-shape answer to req into a Response.
func DecodeRerankAnswer(req *Request, body []byte) (*Response, error) {
	var w RerankAnswer
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decoding a rerank answer: %w", err)
	}
	resp := &Response{ID: w.ID, Model: w.Model, Rerank: make([]RerankResult, len(w.Results))}
	for i, r := range w.Results {
		resp.Rerank[i] = RerankResult{Index: r.Index, RelevanceScore: r.RelevanceScore}
	}
	if w.Usage != nil {
		// servers differ on which count they fill in
		resp.Usage.PromptTokens = max(w.Usage.TotalTokens, w.Usage.PromptTokens)
		resp.Usage.SearchUnits = w.Usage.SearchUnits
	}
	if req.Rerank != nil {
		if err := CheckRerankResults(req.Rerank, resp.Rerank); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
