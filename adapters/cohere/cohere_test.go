package cohere

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func rerankReq(topN int) *adapters.Request {
	return &adapters.Request{Op: adapters.OpRerank, Dialect: "openai", Model: "rerank-v3.5",
		Rerank: &adapters.RerankRequest{Query: "capital of the United States", TopN: topN, ReturnDocuments: true,
			Documents: []string{"a", "b", "c", "d", "e"}}}
}

func TestNewRequest(t *testing.T) {
	up := &adapters.Upstream{Channel: "co", BaseURL: "https://api.cohere.com/", Key: "co-key", Model: "rerank-v3.5"}
	hr, err := Adapter{}.NewRequest(context.Background(), up, rerankReq(3))
	if err != nil {
		t.Fatal(err)
	}
	if hr.URL.String() != "https://api.cohere.com/v2/rerank" || hr.Header.Get("Authorization") != "Bearer co-key" {
		t.Errorf("request %s with %q", hr.URL, hr.Header.Get("Authorization"))
	}
	b, _ := io.ReadAll(hr.Body)
	// v2 takes documents as strings and has no return_documents
	if want := `{"model":"rerank-v3.5","query":"capital of the United States","documents":["a","b","c","d","e"],"top_n":3}`; string(b) != want {
		t.Errorf("body %s\nwant %s", b, want)
	}
	chat := &adapters.Request{Op: adapters.OpChat, Model: "rerank-v3.5", Chat: &adapters.ChatRequest{}}
	if _, err := (Adapter{}).NewRequest(context.Background(), up, chat); err == nil {
		t.Error("a chat request was built for Cohere's rerank")
	}
	var p adapters.Provider = Adapter{}
	_, chats := p.(adapters.ChatProvider)
	_, reranks := p.(adapters.RerankProvider)
	if chats || !reranks {
		t.Error("cohere must have the rerank capability and not chat's")
	}
}

func TestDecodeResponse(t *testing.T) {
	body, err := os.ReadFile("testdata/rerank.response.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Adapter{}.DecodeRerankResponse(rerankReq(3), body)
	if err != nil {
		t.Fatal(err)
	}
	want := []adapters.RerankResult{{Index: 3, RelevanceScore: 0.999071}, {Index: 4, RelevanceScore: 0.7867867}, {Index: 0, RelevanceScore: 0.32713068}}
	if len(resp.Rerank) != 3 || resp.Rerank[0] != want[0] || resp.Rerank[1] != want[1] || resp.Rerank[2] != want[2] {
		t.Errorf("results %+v", resp.Rerank)
	}
	if resp.Usage.SearchUnits != 1 || resp.Usage.PromptTokens != 0 || resp.ID != "07734bd2-2473-4f07-94e1-0d9f0e6843cf" {
		t.Errorf("usage %+v id %q", resp.Usage, resp.ID)
	}
	// more results than top_n, or an index past the documents, is a lie
	if _, err := (Adapter{}).DecodeRerankResponse(rerankReq(2), body); err == nil {
		t.Error("3 results for top_n 2 were accepted")
	}
	var bad map[string]any
	_ = json.Unmarshal(body, &bad)
	bad["results"] = []any{map[string]any{"index": 5, "relevance_score": 0.5}}
	b, _ := json.Marshal(bad)
	if _, err := (Adapter{}).DecodeRerankResponse(rerankReq(0), b); err == nil {
		t.Error("an index past the documents was accepted")
	}
}

func TestDecodeError(t *testing.T) {
	e := Adapter{}.DecodeError(http.StatusBadRequest, []byte(`{"id":"x","message":"invalid request: query must not be empty"}`))
	if e.Status != 400 || e.Message != "invalid request: query must not be empty" || e.Type != adapters.ErrInvalidRequest {
		t.Errorf("400: %+v", e)
	}
	if e := (Adapter{}).DecodeError(http.StatusUnauthorized, []byte(`{"message":"invalid api token"}`)); e.Fault != adapters.FaultChannel {
		t.Errorf("401 is not the channel's fault: %+v", e)
	}
	if e := (Adapter{}).DecodeError(http.StatusBadGateway, []byte(`<html>`)); e.Message != "upstream answered HTTP 502" {
		t.Errorf("not JSON: %+v", e)
	}
}
