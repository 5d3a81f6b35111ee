package jina

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func rerankReq(topN int) *adapters.Request {
	return &adapters.Request{Op: adapters.OpRerank, Dialect: "openai", Model: "jina-reranker-v2-base-multilingual",
		Rerank: &adapters.RerankRequest{Query: "organic skincare", TopN: topN, ReturnDocuments: true, Documents: []string{"a", "b", "c"}}}
}

func TestNewRequest(t *testing.T) {
	up := &adapters.Upstream{Channel: "jn", BaseURL: "https://api.jina.ai", Key: "jina-key", Model: "jina-reranker-v2-base-multilingual"}
	hr, err := Adapter{}.NewRequest(context.Background(), up, rerankReq(2))
	if err != nil {
		t.Fatal(err)
	}
	if hr.URL.String() != "https://api.jina.ai/v1/rerank" || hr.Header.Get("Authorization") != "Bearer jina-key" {
		t.Errorf("request %s with %q", hr.URL, hr.Header.Get("Authorization"))
	}
	b, _ := io.ReadAll(hr.Body)
	// documents are not asked back: the gateway has them
	if want := `{"model":"jina-reranker-v2-base-multilingual","query":"organic skincare","documents":["a","b","c"],"top_n":2,"return_documents":false}`; string(b) != want {
		t.Errorf("body %s\nwant %s", b, want)
	}
	if _, err := (Adapter{}).NewRequest(context.Background(), up, &adapters.Request{Op: adapters.OpEmbedding}); err == nil {
		t.Error("an embedding request was built for Jina's rerank")
	}
}

func TestDecodeResponse(t *testing.T) {
	body, err := os.ReadFile("testdata/rerank.response.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Adapter{}.DecodeRerankResponse(rerankReq(2), body)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Rerank) != 2 || resp.Rerank[0].Index != 0 || resp.Rerank[1].Index != 2 || resp.Rerank[1].RelevanceScore != 0.7624675869941711 {
		t.Errorf("results %+v", resp.Rerank)
	}
	if resp.Usage.PromptTokens != 815 || resp.Usage.SearchUnits != 0 {
		t.Errorf("usage %+v", resp.Usage)
	}
	if _, err := (Adapter{}).DecodeRerankResponse(rerankReq(1), body); err == nil {
		t.Error("2 results for top_n 1 were accepted")
	}
}

func TestDecodeError(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
		fault  adapters.Fault
	}{
		{401, `{"detail":"Invalid API key"}`, "Invalid API key", adapters.FaultChannel},
		{422, `{"detail":[{"loc":["body","query"],"msg":"field required","type":"value_error.missing"},{"msg":"top_n too large"}]}`, "field required; top_n too large", adapters.FaultByStatus},
		{500, `oops`, "upstream answered HTTP 500", adapters.FaultByStatus},
	} {
		e := Adapter{}.DecodeError(c.status, []byte(c.body))
		if e.Status != c.status || e.Message != c.want || e.Fault != c.fault {
			t.Errorf("%d %s: %+v", c.status, c.body, e)
		}
	}
}
