package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// rerankRequest is /v1/rerank's body in the widely used shape; documents
// are strings or {"text": ...} objects.
type rerankRequest struct {
	Model           string            `json:"model"`
	Query           *string           `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments *bool             `json:"return_documents"`
}

// decodeRerank validates and decodes a rerank body.
func decodeRerank(req *adapters.Request, body []byte, r *http.Request) error {
	if r != nil {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				return adapters.Errorf(http.StatusUnsupportedMediaType, adapters.ErrInvalidRequest,
					"/v1/rerank takes a JSON body: send it with 'Content-Type: application/json', not %q", ct)
			}
		}
	}
	var w rerankRequest
	if err := adapters.DecodeJSON(body, &w); err != nil {
		return err
	}
	req.Model = w.Model
	if w.Query == nil || strings.TrimSpace(*w.Query) == "" {
		return adapters.BadRequest("'query' is required: the text the documents are ranked against")
	}
	n := len(w.Documents)
	if n == 0 {
		return adapters.BadRequest("'documents' must be a non-empty array of strings (or of {\"text\": ...} objects)")
	}
	if n > adapters.MaxRerankDocuments {
		return adapters.BadRequest("'documents' has %d entries, more than the gateway's limit of %d a request: split them over several requests", n, adapters.MaxRerankDocuments)
	}
	rr := &adapters.RerankRequest{Query: *w.Query, Documents: make([]string, n)}
	for i, raw := range w.Documents {
		text, ok := documentText(raw)
		if !ok {
			return adapters.BadRequest("'documents[%d]' must be a string or an object with a string 'text'", i)
		}
		rr.Documents[i] = text
	}
	if w.TopN != nil {
		if *w.TopN < 1 || *w.TopN > n {
			return adapters.BadRequest("'top_n' must be between 1 and the number of documents (%d), not %d", n, *w.TopN)
		}
		rr.TopN = *w.TopN
	}
	rr.ReturnDocuments = w.ReturnDocuments != nil && *w.ReturnDocuments
	req.Rerank = rr
	return nil
}

// documentText reads a document given as a string or as {"text": ...}.
func documentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	case '{':
		var d struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &d) != nil || d.Text == nil {
			return "", false
		}
		return *d.Text, true
	}
	return "", false
}

// EncodeRerankAnswer writes a ranking in the common shape, each result's
// document taken from the request when the client asked for them.
func EncodeRerankAnswer(req *adapters.Request, resp *adapters.Response) ([]byte, error) {
	out := adapters.RerankAnswer{ID: resp.ID, Model: req.Model, Results: make([]adapters.RerankAnswerEntry, len(resp.Rerank))}
	for i, r := range resp.Rerank {
		out.Results[i] = adapters.RerankAnswerEntry{Index: r.Index, RelevanceScore: r.RelevanceScore}
		if req.Rerank != nil && req.Rerank.ReturnDocuments && r.Index >= 0 && r.Index < len(req.Rerank.Documents) {
			out.Results[i].Document = &adapters.RerankDocument{Text: req.Rerank.Documents[r.Index]}
		}
	}
	u := resp.Usage
	out.Usage = &adapters.RerankUsage{TotalTokens: u.PromptTokens, SearchUnits: u.SearchUnits}
	return json.Marshal(out)
}

// newRerankRequest sends a rerank to an OpenAI-compatible server's
// /v1/rerank in the common shape.
func newRerankRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Rerank == nil {
		return nil, adapters.Unsupported("channel %q (openai) cannot rerank a %s request", up.Channel, req.Dialect)
	}
	return adapters.NewRerankRequest(ctx, up, req.Rerank)
}
