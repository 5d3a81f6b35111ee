package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// The rerank fakes rank documents the same way: a document scores the
// share of the query's words it contains, over the query's words plus one
// (RerankScore), ties in the documents' order. Tokens are words: a
// document read beside the query costs both their words (RerankTokens).
// FakeCohere bills a search unit per 100 documents, as Cohere does for
// documents under 500 tokens.

// RerankScore is the relevance the fakes give doc for query.
func RerankScore(query, doc string) float64 {
	qw := strings.Fields(strings.ToLower(query))
	have := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(doc)) {
		have[strings.Trim(w, ".,;:!?")] = true
	}
	n := 0
	for _, w := range qw {
		if have[strings.Trim(w, ".,;:!?")] {
			n++
		}
	}
	return float64(n) / float64(len(qw)+1)
}

// RerankTokens is the usage the token-billing fakes report.
func RerankTokens(query string, docs []string) int64 {
	q := int64(len(strings.Fields(query)))
	n := int64(0)
	for _, d := range docs {
		n += q + int64(len(strings.Fields(d)))
	}
	return n
}

// RerankOrder is the documents' indexes, most relevant first, cut to topN
// (0: all).
func RerankOrder(query string, docs []string, topN int) []int {
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return RerankScore(query, docs[idx[a]]) > RerankScore(query, docs[idx[b]]) })
	if topN > 0 && topN < len(idx) {
		idx = idx[:topN]
	}
	return idx
}

// commonRerank is the widely used rerank body (Jina's, and OpenAI-compatible
// servers').
type commonRerank struct {
	Model           string            `json:"model"`
	Query           string            `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments *bool             `json:"return_documents"`
}

// readCommonRerank reads a common-shape body, or says what is wrong.
func readCommonRerank(raw []byte) (req commonRerank, docs []string, msg string) {
	if err := json.Unmarshal(raw, &req); err != nil {
		return req, nil, "the body is not a rerank request: " + err.Error()
	}
	if req.Model == "" || req.Query == "" || len(req.Documents) == 0 {
		return req, nil, "model, query and documents are required"
	}
	for i, d := range req.Documents {
		var s string
		var o struct{ Text string }
		switch {
		case json.Unmarshal(d, &s) == nil:
		case json.Unmarshal(d, &o) == nil && o.Text != "":
			s = o.Text
		default:
			return req, nil, fmt.Sprintf("documents[%d] is neither a string nor a {text} object", i)
		}
		docs = append(docs, s)
	}
	if req.TopN != nil && *req.TopN < 1 {
		return req, nil, "top_n must be at least 1"
	}
	return req, docs, ""
}

// commonRerankAnswer is the common-shape answer, with documents unless the
// request said return_documents false (Jina's default is true).
func commonRerankAnswer(req commonRerank, docs []string, b *Behavior) map[string]any {
	top := 0
	if req.TopN != nil {
		top = *req.TopN
	}
	results := []any{}
	for _, i := range RerankOrder(req.Query, docs, top) {
		r := map[string]any{"index": i, "relevance_score": RerankScore(req.Query, docs[i])}
		if req.ReturnDocuments == nil || *req.ReturnDocuments {
			r["document"] = map[string]any{"text": docs[i]}
		}
		results = append(results, r)
	}
	out := map[string]any{"model": req.Model, "results": results}
	if !b.NoUsage {
		out["usage"] = map[string]any{"total_tokens": RerankTokens(req.Query, docs)}
	}
	return out
}

// openAIRerank is FakeOpenAI's /v1/rerank: an OpenAI-compatible rerank
// server (vLLM's and others'), the common shape with an id.
func openAIRerank(w http.ResponseWriter, raw []byte, b *Behavior) {
	req, docs, msg := readCommonRerank(raw)
	if msg != "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	out := commonRerankAnswer(req, docs, b)
	out["id"] = "rerank-fake1"
	writeJSONStatus(w, http.StatusOK, out)
}

// FakeJina speaks Jina's rerank API: POST /v1/rerank with a Bearer key, the
// common shape, errors as {"detail": ...}.
type FakeJina struct {
	*httptest.Server
	Key string
	recorder
}

var _ Fake = (*FakeJina)(nil)

// NewFakeJina starts a fake that expects key.
func NewFakeJina(t testing.TB, key string) *FakeJina {
	Secret(key)
	f := &FakeJina{Key: key}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeJina) BaseURL() string { return f.URL }

func jinaError(w http.ResponseWriter, status int, detail string) {
	writeJSONStatus(w, status, map[string]any{"detail": detail})
}

func (f *FakeJina) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	cfg, _ := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		jinaError(w, http.StatusUnauthorized, "Invalid API key. Please get your free API key at the Jina AI website.")
		return
	}
	if failed(w, &cfg, func() { jinaError(w, cfg.FailStatus, "Internal server error") }) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/rerank" {
		jinaError(w, http.StatusNotFound, "Not Found")
		return
	}
	req, docs, msg := readCommonRerank(raw)
	if msg != "" {
		writeJSONStatus(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{map[string]any{"loc": []string{"body"}, "msg": msg, "type": "value_error"}}})
		return
	}
	writeJSONStatus(w, http.StatusOK, commonRerankAnswer(req, docs, &cfg))
}

// FakeCohere speaks Cohere's v2 rerank API: POST /v2/rerank with a Bearer
// key and documents as strings, answering indexes and scores (never the
// documents) and meta.billed_units.search_units; errors as
// {"id": ..., "message": ...}.
type FakeCohere struct {
	*httptest.Server
	Key string
	recorder
}

var _ Fake = (*FakeCohere)(nil)

// NewFakeCohere starts a fake that expects key.
func NewFakeCohere(t testing.TB, key string) *FakeCohere {
	Secret(key)
	f := &FakeCohere{Key: key}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeCohere) BaseURL() string { return f.URL }

func cohereError(w http.ResponseWriter, status int, msg string) {
	writeJSONStatus(w, status, map[string]any{"id": "fake-error-id", "message": msg})
}

func (f *FakeCohere) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	cfg, _ := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	w.Header().Set("X-Trace-Id", "fake-trace")
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		cohereError(w, http.StatusUnauthorized, "invalid api token")
		return
	}
	if failed(w, &cfg, func() {
		cohereError(w, cfg.FailStatus, "internal server error, this has been reported to our developers")
	}) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v2/rerank" {
		cohereError(w, http.StatusNotFound, "Not Found")
		return
	}
	var req struct {
		Model     string   `json:"model"`
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		TopN      *int     `json:"top_n"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		cohereError(w, http.StatusBadRequest, "invalid request: documents must be a list of strings: "+err.Error())
		return
	}
	if req.Model == "" || req.Query == "" || len(req.Documents) == 0 {
		cohereError(w, http.StatusBadRequest, "invalid request: model, query and documents are required")
		return
	}
	top := 0
	if req.TopN != nil {
		if *req.TopN < 1 {
			cohereError(w, http.StatusBadRequest, "invalid request: top_n must be at least 1")
			return
		}
		top = *req.TopN
	}
	results := []any{}
	for _, i := range RerankOrder(req.Query, req.Documents, top) {
		results = append(results, map[string]any{"index": i, "relevance_score": RerankScore(req.Query, req.Documents[i])})
	}
	out := map[string]any{"id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf", "results": results,
		"meta": map[string]any{"api_version": map[string]any{"version": "2"}}}
	if !cfg.NoUsage {
		out["meta"].(map[string]any)["billed_units"] = map[string]any{"search_units": (len(req.Documents) + 99) / 100}
	}
	writeJSONStatus(w, http.StatusOK, out)
}

// failed answers with the behaviour's failure, if it has one: FailBody
// as it is under FailStatus (a 200 with a body that lies, too), or the
// vendor's error written by vendorError.
func failed(w http.ResponseWriter, b *Behavior, vendorError func()) bool {
	if b.FailStatus == 0 {
		return false
	}
	if b.FailBody != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(b.FailStatus)
		io.WriteString(w, b.FailBody)
		return true
	}
	vendorError()
	return true
}
