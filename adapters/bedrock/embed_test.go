package bedrock_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestEmbeddings: Titan Text Embeddings and Cohere Embed through
// InvokeModel, with the bodies of their model-parameter pages
// (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html,
// model-parameters-embed.html); several inputs to Titan, dimensions to
// Cohere and a chat model refused with a 400.
func TestEmbeddings(t *testing.T) {
	a := load(t, `{}`)
	dims := int64(256)
	for _, c := range []struct {
		model   string
		input   []string
		dims    *int64
		body    string // sent
		answer  string
		vectors int
		prompt  int64
		refusal string
	}{
		{model: "amazon.titan-embed-text-v2:0", input: []string{"What are the different services that you offer?"}, dims: &dims,
			body:   `{"inputText":"What are the different services that you offer?","dimensions":256}`,
			answer: `{"embedding":[0.0123,-0.0456,0.0789],"inputTextTokenCount":10}`, vectors: 1, prompt: 10},
		{model: "cohere.embed-english-v3", input: []string{"Hello", "World"},
			body:   `{"texts":["Hello","World"],"input_type":"search_document"}`,
			answer: `{"embeddings":[[0.01,0.02],[0.03,0.04]],"id":"5a5e4b6f-0c4d-4c1c-9f57-5d1d3f2e2f35","response_type":"embeddings_floats","texts":["hello","world"]}`, vectors: 2},
		{model: "amazon.titan-embed-text-v2:0", input: []string{"a", "b"}, refusal: "embeds one text per request"},
		{model: "cohere.embed-multilingual-v3", input: []string{"a"}, dims: &dims, refusal: "Cohere Embed has fixed dimensions"},
		{model: "anthropic.claude-3-5-haiku-20241022-v1:0", input: []string{"a"}, refusal: "is not an embedding model"},
	} {
		req := &adapters.Request{Op: adapters.OpEmbedding, Dialect: "openai", Embedding: &adapters.EmbeddingRequest{Input: c.input, Dimensions: c.dims}}
		hr, err := a.NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: "https://b.invalid", Key: "ABSKk", Model: c.model}, req)
		if c.refusal != "" {
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, c.refusal) {
				t.Errorf("%s %v: %v, want a 400 saying %q", c.model, c.input, err, c.refusal)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(hr.Body)
		if string(body) != c.body || hr.URL.Path != "/model/"+c.model+"/invoke" {
			t.Errorf("%s: sent %s to %s", c.model, body, hr.URL.Path)
		}
		resp, err := a.DecodeResponse(req, []byte(c.answer))
		if err != nil || len(resp.Embeddings) != c.vectors || resp.Usage.PromptTokens != c.prompt {
			t.Errorf("%s: %+v %v", c.model, resp, err)
		}
		// an answer with another count of vectors than inputs is refused
		req.Embedding.Input = append(req.Embedding.Input, "extra")
		if _, err := a.DecodeResponse(req, []byte(c.answer)); err == nil {
			t.Errorf("%s: a short answer was taken", c.model)
		}
	}
}
