package openai_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// Cases from the adapter's review: each was wrong once.
func TestAcceptedForms(t *testing.T) {
	var a openai.Adapter
	for _, body := range []string{
		`{"model":"x","prompt":[1212,318,257]}`,
		`{"model":"x","prompt":[[1212,318],[257]]}`,
	} {
		req, err := a.DecodeRequest(adapters.OpCompletion, []byte(body), nil)
		if err != nil || len(req.Completion.Prompt) == 0 {
			t.Errorf("token prompt %s refused: %v", body, err)
		}
	}
	for _, tc := range []string{
		`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}`,
		`{"type":"custom","custom":{"name":"grep"}}`,
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":` + tc + `}`
		if _, err := a.DecodeRequest(adapters.OpChat, []byte(body), nil); err != nil {
			t.Errorf("tool_choice %s refused: %v", tc, err)
		}
	}
	_, err := a.DecodeRequest(adapters.OpChat, []byte(`{"model":"m","messages":[{"role":"user","content":5}]}`), nil)
	if err == nil || !strings.Contains(err.Error(), "a string or an array of content parts") {
		t.Errorf("content of the wrong type: %v", err)
	}
}

// The engines path's model is the one billed, so it is the one sent.
func TestEnginesModelWins(t *testing.T) {
	var a openai.Adapter
	for _, body := range []string{`{"model":"text-embedding-3-large","input":"hi"}`, `{"input":"model"}`} {
		r, _ := http.NewRequest(http.MethodPost, "/v1/engines/text-embedding-3-small/embeddings", nil)
		req, err := a.DecodeRequest(adapters.OpEmbedding, []byte(body), r)
		if err != nil {
			t.Fatal(err)
		}
		_, sentBody := sent(t, &adapters.Upstream{BaseURL: "http://up", Key: "k", Model: req.Model}, req)
		var got struct{ Model string }
		if err := json.Unmarshal(sentBody, &got); err != nil || got.Model != "text-embedding-3-small" {
			t.Errorf("body %s reached the upstream as %s", body, sentBody)
		}
	}
}

func TestPartialTextOfCompletions(t *testing.T) {
	var a openai.Adapter
	req := &adapters.Request{Op: adapters.OpCompletion, Dialect: openai.Name, Stream: true}
	stream := "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"Hello\"}]}\n\n" +
		"data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" world\"}]}\n\n"
	dec := adapters.DecodeStream(a, req, strings.NewReader(stream))
	for {
		if _, err := dec.Next(); err != nil {
			break
		}
	}
	if got := dec.PartialText(); got != "Hello world" {
		t.Fatalf("PartialText = %q", got)
	}
}
