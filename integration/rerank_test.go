package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// rerankConfig: a cohere, a jina and an OpenAI-compatible rerank
// channel, and an anthropic chat channel that has no rerank endpoint.
// Cohere's rerank is USD 0.002 a search unit (2000 units); Jina's and the
// OpenAI-compatible server's tokens 2 and 3 units each (USD 2 and 3 per
// million).
func rerankConfig() *caddyfile {
	return gatewayConfig().
		channel("co", "cohere", "{{COHERE}}", "co-up-key", "rerank-v3.5").
		channel("jn", "jina", "{{JINA}}", "jina-up-key", "jina-reranker-v2-base-multilingual").
		channel("compat", "openai", "{{COMPAT}}", "compat-up-key", "bge-reranker-v2-m3").
		channel("claude", "anthropic", "{{CLAUDE}}", "claude-up-key", "claude-test").
		price("rerank-v3.5", "search_unit 0.002").
		price("jina-reranker-v2-base-multilingual", "input 2").
		price("bge-reranker-v2-m3", "input 3").
		price("claude-test", "input 3", "output 15")
}

type rerankSetup struct {
	gw     *gatewaytest.Gateway
	cohere *gatewaytest.FakeCohere
	jina   *gatewaytest.FakeJina
	compat *gatewaytest.FakeOpenAI
}

func startRerank(t *testing.T) *rerankSetup {
	t.Helper()
	s := &rerankSetup{
		cohere: gatewaytest.NewFakeCohere(t, "co-up-key"),
		jina:   gatewaytest.NewFakeJina(t, "jina-up-key"),
		compat: gatewaytest.NewFakeOpenAI(t, "compat-up-key"),
	}
	claude := gatewaytest.NewFakeAnthropic(t, "claude-up-key")
	s.gw = gatewaytest.Start(t, rerankConfig().String(), gatewaytest.Vars{
		"COHERE": s.cohere.BaseURL(), "JINA": s.jina.BaseURL(), "COMPAT": s.compat.BaseURL(), "CLAUDE": claude.BaseURL(),
	})
	return s
}

var rerankDocs = []string{
	"Carson City is the capital city of the American state of Nevada.",
	"Washington, D.C. is the capital of the United States.",
	"Capital punishment has existed in the United States since before it was a country.",
	"The Commonwealth of the Northern Mariana Islands is a group of islands in the Pacific Ocean.",
}

const rerankQuery = "What is the capital of the United States?"

// rerankAnswer is /v1/rerank's answer as a client reads it.
type rerankAnswer struct {
	Model   string `json:"model"`
	Results []struct {
		Index          int      `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
		Document       *struct {
			Text string `json:"text"`
		} `json:"document"`
	} `json:"results"`
	Usage *struct {
		TotalTokens *int64 `json:"total_tokens"`
		SearchUnits int64  `json:"search_units"`
	} `json:"usage"`
}

func (s *rerankSetup) rerank(t *testing.T, key string, body any) (int, rerankAnswer, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, raw := s.gw.Do(http.MethodPost, "/v1/rerank", key, b, nil)
	var a rerankAnswer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("rerank answer %s: %v", raw, err)
		}
	}
	return resp.StatusCode, a, string(raw)
}

// checkRanking compares an answer with the order the fakes rank in, and
// its documents with what was asked.
func checkRanking(t *testing.T, a rerankAnswer, topN int, withDocs bool) {
	t.Helper()
	want := gatewaytest.RerankOrder(rerankQuery, rerankDocs, topN)
	if len(a.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(a.Results), len(want))
	}
	for i, r := range a.Results {
		if r.Index != want[i] || r.RelevanceScore == nil || *r.RelevanceScore != gatewaytest.RerankScore(rerankQuery, rerankDocs[r.Index]) {
			t.Errorf("result %d = index %d score %v, want index %d", i, r.Index, r.RelevanceScore, want[i])
		}
		switch {
		case withDocs && (r.Document == nil || r.Document.Text != rerankDocs[r.Index]):
			t.Errorf("result %d's document = %+v, want %q", i, r.Document, rerankDocs[r.Index])
		case !withDocs && r.Document != nil:
			t.Errorf("result %d has a document the client did not ask for", i)
		}
	}
}

func TestRerankCohere(t *testing.T) {
	s := startRerank(t)
	key := s.gw.AddUser("cora", 1_000_000)
	st, a, raw := s.rerank(t, key, map[string]any{"model": "rerank-v3.5", "query": rerankQuery, "documents": rerankDocs, "top_n": 2, "return_documents": true})
	if st != http.StatusOK {
		t.Fatalf("status %d: %s", st, raw)
	}
	checkRanking(t, a, 2, true)
	if a.Model != "rerank-v3.5" || a.Usage == nil || a.Usage.SearchUnits != 1 {
		t.Errorf("model %q usage %+v, want rerank-v3.5 and 1 search unit", a.Model, a.Usage)
	}
	// Cohere's v2 API was called with its own body and the channel's key
	up := s.cohere.Requests()[0]
	if up.Path != "/v2/rerank" || up.Header.Get("Authorization") != "Bearer co-up-key" {
		t.Errorf("upstream got %s with %q", up.Path, up.Header.Get("Authorization"))
	}
	if _, ok := up.Body["return_documents"]; ok || up.Body["top_n"] != float64(2) || up.Body["model"] != "rerank-v3.5" {
		t.Errorf("upstream body %s", up.Raw)
	}
	row := s.gw.WaitUsage("cora", 1)[0]
	// one search unit at USD 0.002
	if _, used := s.gw.Quota("cora"); used != 2000 {
		t.Errorf("used %d units, want 2000", used)
	}
	if row.Endpoint != "/v1/rerank" || row.Channel != "co" || row.Cost != 2000 || row.Status != 200 || row.Model != "rerank-v3.5" || row.Estimated {
		t.Errorf("usage row %+v", row)
	}
}

func TestRerankJina(t *testing.T) {
	s := startRerank(t)
	key := s.gw.AddUser("jan", 1_000_000)
	// documents as {text} objects; no top_n: every document, ranked
	docs := make([]map[string]string, len(rerankDocs))
	for i, d := range rerankDocs {
		docs[i] = map[string]string{"text": d}
	}
	st, a, raw := s.rerank(t, key, map[string]any{"model": "jina-reranker-v2-base-multilingual", "query": rerankQuery, "documents": docs})
	if st != http.StatusOK {
		t.Fatalf("status %d: %s", st, raw)
	}
	checkRanking(t, a, 0, false)
	tokens := gatewaytest.RerankTokens(rerankQuery, rerankDocs)
	if a.Usage == nil || a.Usage.TotalTokens == nil || *a.Usage.TotalTokens != tokens || a.Usage.SearchUnits != 0 {
		t.Errorf("usage %+v, want %d tokens", a.Usage, tokens)
	}
	up := s.jina.Requests()[0]
	if up.Path != "/v1/rerank" || up.Header.Get("Authorization") != "Bearer jina-up-key" || up.Body["return_documents"] != false {
		t.Errorf("upstream got %s %s", up.Path, up.Raw)
	}
	row := s.gw.WaitUsage("jan", 1)[0]
	if _, used := s.gw.Quota("jan"); used != 2*tokens {
		t.Errorf("used %d units, want %d (2 a token)", used, 2*tokens)
	}
	if row.PromptTokens != tokens || row.Cost != 2*tokens || row.Channel != "jn" {
		t.Errorf("usage row %+v", row)
	}
}

func TestRerankOpenAICompatible(t *testing.T) {
	s := startRerank(t)
	key := s.gw.AddUser("oli", 1_000_000)
	st, a, raw := s.rerank(t, key, map[string]any{"model": "bge-reranker-v2-m3", "query": rerankQuery, "documents": rerankDocs, "top_n": 3, "return_documents": true})
	if st != http.StatusOK {
		t.Fatalf("status %d: %s", st, raw)
	}
	checkRanking(t, a, 3, true)
	tokens := gatewaytest.RerankTokens(rerankQuery, rerankDocs)
	if up := s.compat.Requests()[0]; up.Path != "/v1/rerank" || up.Header.Get("Authorization") != "Bearer compat-up-key" {
		t.Errorf("upstream got %s with %q", up.Path, up.Header.Get("Authorization"))
	}
	// a server that reports no usage is billed on the local tokenizer
	s.compat.Set(func(b *gatewaytest.Behavior) { b.NoUsage = true })
	if st, _, raw := s.rerank(t, key, map[string]any{"model": "bge-reranker-v2-m3", "query": rerankQuery, "documents": rerankDocs}); st != http.StatusOK {
		t.Fatalf("status %d: %s", st, raw)
	}
	local := localRerankTokens("bge-reranker-v2-m3")
	rows := s.gw.WaitUsage("oli", 2)
	if rows[0].PromptTokens != tokens || rows[0].Cost != 3*tokens || rows[0].Estimated {
		t.Errorf("reported usage row %+v, want %d tokens", rows[0], tokens)
	}
	if rows[1].PromptTokens != local || rows[1].Cost != 3*local || !rows[1].Estimated {
		t.Errorf("estimated usage row %+v, want %d tokens", rows[1], local)
	}
	if _, used := s.gw.Quota("oli"); used != 3*tokens+3*local {
		t.Errorf("used %d, want %d", used, 3*tokens+3*local)
	}
}

// localRerankTokens is the gateway's own count of the test rerank.
func localRerankTokens(model string) int64 {
	n := int64(0)
	for _, d := range rerankDocs {
		n += tokenizer.Count(model, rerankQuery) + tokenizer.Count(model, d)
	}
	return n
}

// Refusals: bad input, a model whose family cannot rerank, a rerank model
// asked to chat; each a clear error that costs nothing and never reaches
// an upstream.
func TestRerankRefusals(t *testing.T) {
	s := startRerank(t)
	key := s.gw.AddUser("rita", 1_000_000)
	many := make([]string, 1001)
	for i := range many {
		many[i] = "doc"
	}
	base := func(change func(m map[string]any)) map[string]any {
		m := map[string]any{"model": "rerank-v3.5", "query": rerankQuery, "documents": rerankDocs}
		change(m)
		return m
	}
	cases := []struct {
		name   string
		body   map[string]any
		status int
		says   string
	}{
		{"no query", base(func(m map[string]any) { delete(m, "query") }), 400, "'query' is required"},
		{"blank query", base(func(m map[string]any) { m["query"] = "  " }), 400, "'query' is required"},
		{"no documents", base(func(m map[string]any) { m["documents"] = []string{} }), 400, "'documents' must be a non-empty array"},
		{"numbers", base(func(m map[string]any) { m["documents"] = []int{1, 2} }), 400, "'documents[0]' must be a string"},
		{"object without text", base(func(m map[string]any) { m["documents"] = []any{map[string]any{"title": "x"}} }), 400, "'documents[0]' must be a string"},
		{"top_n zero", base(func(m map[string]any) { m["top_n"] = 0 }), 400, "'top_n' must be between 1 and the number of documents (4)"},
		{"top_n too large", base(func(m map[string]any) { m["top_n"] = 5 }), 400, "'top_n' must be between 1 and the number of documents (4)"},
		{"too many documents", base(func(m map[string]any) { m["documents"] = many }), 400, "more than the gateway's limit of 1000"},
		{"no model", base(func(m map[string]any) { delete(m, "model") }), 400, "'model' is required"},
		{"unknown model", base(func(m map[string]any) { m["model"] = "no-such-reranker" }), 404, "does not exist on this gateway"},
		{"chat family", base(func(m map[string]any) { m["model"] = "claude-test" }), 400, `channel \"claude\" (anthropic) does not serve rerank requests`},
	}
	for _, c := range cases {
		st, _, raw := s.rerank(t, key, c.body)
		if st != c.status || !strings.Contains(raw, c.says) || !strings.Contains(raw, `"error"`) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, st, raw, c.status, c.says)
		}
	}
	// a body that is not JSON
	resp, raw := s.gw.Do(http.MethodPost, "/v1/rerank", key, []byte("query=x"), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(raw), "Content-Type: application/json") {
		t.Errorf("form body: %d %s", resp.StatusCode, raw)
	}
	// a rerank model asked to chat
	resp, raw = s.gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"rerank-v3.5","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "serves only /v1/rerank") {
		t.Errorf("chat with a rerank model: %d %s", resp.StatusCode, raw)
	}
	if n := len(s.cohere.Requests()); n != 0 {
		t.Errorf("the upstream got %d refused requests", n)
	}
	rows := s.gw.WaitUsage("rita", len(cases)+2)
	if _, used := s.gw.Quota("rita"); used != 0 {
		t.Errorf("refusals cost %d units", used)
	}
	for _, r := range rows {
		if r.Cost != 0 || r.Status < 400 {
			t.Errorf("refusal row %+v", r)
		}
	}
	// a user whose quota cannot cover the worst case (one search unit)
	poor := s.gw.AddUser("pete", 1999)
	if st, _, raw := s.rerank(t, poor, base(func(map[string]any) {})); st != http.StatusTooManyRequests || !strings.Contains(raw, "insufficient_quota") {
		t.Errorf("under-funded rerank: %d %s", st, raw)
	}
}

// Upstream failures: the gateway's words, the right status, nothing charged.
func TestRerankUpstreamFailures(t *testing.T) {
	s := startRerank(t)
	key := s.gw.AddUser("fay", 1_000_000)
	body := func(model string) map[string]any {
		return map[string]any{"model": model, "query": rerankQuery, "documents": rerankDocs, "top_n": 2}
	}
	s.cohere.Set(func(b *gatewaytest.Behavior) { b.FailStatus = http.StatusInternalServerError })
	if st, _, raw := s.rerank(t, key, body("rerank-v3.5")); st != http.StatusBadGateway || !strings.Contains(raw, `the upstream of channel \"co\" failed (HTTP 500)`) {
		t.Errorf("cohere 500: %d %s", st, raw)
	}
	// Cohere's own refusal of the request keeps its words
	s.cohere.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus, b.FailBody = http.StatusBadRequest, `{"id":"e1","message":"invalid request: query is too long"}`
	})
	if st, _, raw := s.rerank(t, key, body("rerank-v3.5")); st != http.StatusBadRequest || !strings.Contains(raw, "query is too long") {
		t.Errorf("cohere 400: %d %s", st, raw)
	}
	// Jina refusing the channel's key is the operator's problem
	s.jina.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus, b.FailBody = http.StatusUnauthorized, `{"detail":"Invalid API key"}`
	})
	if st, _, raw := s.rerank(t, key, body("jina-reranker-v2-base-multilingual")); st != http.StatusBadGateway || !strings.Contains(raw, "refused channel") {
		t.Errorf("jina 401: %d %s", st, raw)
	}
	// an answer that ranks a document the request did not have is not
	// relayed; the upstream did read the documents, so, as for any answer
	// that cannot be read, they are billed on the gateway's own count
	s.compat.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus, b.FailBody = http.StatusOK, `{"results":[{"index":9,"relevance_score":0.5}],"usage":{"total_tokens":5}}`
	})
	if st, _, raw := s.rerank(t, key, body("bge-reranker-v2-m3")); st != http.StatusBadGateway || !strings.Contains(raw, "could not be read") {
		t.Errorf("lying upstream: %d %s", st, raw)
	}
	rows := s.gw.WaitUsage("fay", 4)
	for _, r := range rows[:3] {
		if r.Cost != 0 || r.Status < 400 {
			t.Errorf("failure row %+v", r)
		}
	}
	local := localRerankTokens("bge-reranker-v2-m3")
	if r := rows[3]; r.Status != http.StatusBadGateway || r.Cost != 3*local || !r.Estimated {
		t.Errorf("lying upstream's row %+v, want %d units", r, 3*local)
	}
	if _, used := s.gw.Quota("fay"); used != 3*local {
		t.Errorf("failures cost %d units, want %d", used, 3*local)
	}
}
