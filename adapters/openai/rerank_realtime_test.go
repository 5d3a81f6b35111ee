package openai

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func TestDecodeRerank(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/rerank", nil)
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	req, err := Adapter{}.DecodeRequest(adapters.OpRerank, []byte(`{"model":"m","query":"q","documents":["a",{"text":"b"}],"top_n":1,"return_documents":true}`), r)
	if err != nil {
		t.Fatal(err)
	}
	rr := req.Rerank
	if req.Model != "m" || rr.Query != "q" || len(rr.Documents) != 2 || rr.Documents[1] != "b" || rr.TopN != 1 || !rr.ReturnDocuments {
		t.Errorf("decoded %+v %+v", req, rr)
	}
	for body, want := range map[string]string{
		`{"model":"m","documents":["a"]}`:                       "'query' is required",
		`{"model":"m","query":"q","documents":[]}`:              "'documents' must be a non-empty array",
		`{"model":"m","query":"q","documents":"a"}`:             "invalid type for 'documents'",
		`{"model":"m","query":"q","documents":[null]}`:          "'documents[0]' must be a string",
		`{"model":"m","query":"q","documents":["a"],"top_n":2}`: "'top_n' must be between 1 and the number of documents (1), not 2",
		`{"query":"q","documents":["a"]}`:                       "'model' is required",
	} {
		_, err := Adapter{}.DecodeRequest(adapters.OpRerank, []byte(body), r)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	r.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	if _, err := (Adapter{}).DecodeRequest(adapters.OpRerank, []byte(`{}`), r); err == nil || err.(*adapters.Error).Status != http.StatusUnsupportedMediaType {
		t.Errorf("multipart: %v", err)
	}
}

func TestEncodeRerankAnswer(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpRerank, Model: "m", Rerank: &adapters.RerankRequest{Query: "q", Documents: []string{"a", "b"}, ReturnDocuments: true}}
	resp := &adapters.Response{ID: "r1", Rerank: []adapters.RerankResult{{Index: 1, RelevanceScore: 0.5}, {Index: 0, RelevanceScore: 0.25}}, Usage: adapters.Usage{SearchUnits: 1}}
	b, err := Adapter{}.EncodeResponse(req, resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"r1","model":"m","results":[{"index":1,"relevance_score":0.5,"document":{"text":"b"}},{"index":0,"relevance_score":0.25,"document":{"text":"a"}}],"usage":{"total_tokens":0,"search_units":1}}`
	if string(b) != want {
		t.Errorf("answer %s\nwant   %s", b, want)
	}
}

// A response.done as OpenAI's reference shows it.
const responseDoneEvent = `{"type":"response.done","event_id":"event_3132","response":{"id":"resp_001","object":"realtime.response","status":"completed","status_details":null,"output":[],"usage":{"total_tokens":253,"input_tokens":132,"output_tokens":121,"input_token_details":{"text_tokens":119,"audio_tokens":13,"cached_tokens":64,"cached_tokens_details":{"text_tokens":64,"audio_tokens":0}},"output_token_details":{"text_tokens":30,"audio_tokens":91}}}}`

func TestRealtimeUsage(t *testing.T) {
	kind, u := Adapter{}.RealtimeEvent([]byte(responseDoneEvent))
	want := adapters.Usage{PromptTokens: 132, CachedTokens: 64, AudioPromptTokens: 13, CompletionTokens: 121, AudioCompletionTokens: 91}
	if kind != adapters.RealtimeResponseDone || u != want {
		t.Errorf("usage %+v %v, want %+v", u, kind, want)
	}
	if kind, _ := (Adapter{}).RealtimeEvent([]byte(`{"event_id":"e1","type":"response.created","response":{"id":"resp_1"}}`)); kind != adapters.RealtimeResponseStarted {
		t.Errorf("response.created read as %v", kind)
	}
	for _, ev := range []string{
		`{"type":"response.audio.delta","delta":"AAAA"}`,
		`{"type":"conversation.item.created","item":{"content":[{"text":"\"response.done\""}]}}`,
		`not json "response.done"`,
	} {
		if kind, _ := (Adapter{}).RealtimeEvent([]byte(ev)); kind != adapters.RealtimeOther {
			t.Errorf("%s read as %v", ev, kind)
		}
	}
	if kind, u := (Adapter{}).RealtimeEvent([]byte(`{"type":"response.done","response":{"status":"failed","usage":null}}`)); kind != adapters.RealtimeResponseDone || u.Known() {
		t.Errorf("a response.done without usage: %+v %v", u, kind)
	}
}

func TestRealtimeKeys(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/realtime?model=m", nil)
	r.Header.Set("Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.sk-abc, openai-beta.realtime-v1")
	if op, ok := (Adapter{}).Route(r); !ok || op != adapters.OpRealtime {
		t.Errorf("route %v %v", op, ok)
	}
	if k := (Adapter{}).Credential(r); k != "sk-abc" {
		t.Errorf("credential %q", k)
	}
	Adapter{}.StripCredentials(r)
	if got := r.Header.Get("Sec-WebSocket-Protocol"); got != "realtime, openai-beta.realtime-v1" {
		t.Errorf("subprotocols after strip %q", got)
	}
	url, h, err := Adapter{}.RealtimeDial(&adapters.Upstream{BaseURL: "https://api.openai.com/", Key: "sk-up", Model: "gpt-4o-realtime-preview"}, r)
	if err != nil || url != "wss://api.openai.com/v1/realtime?model=gpt-4o-realtime-preview" || h.Get("Authorization") != "Bearer sk-up" || h.Get("OpenAI-Beta") != "realtime=v1" {
		t.Errorf("dial %s %v %v", url, h, err)
	}
	// elsewhere the subprotocol is no key
	other := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	other.Header.Set("Sec-WebSocket-Protocol", "openai-insecure-api-key.sk-abc")
	if k := (Adapter{}).Credential(other); k != "" {
		t.Errorf("credential off /v1/realtime: %q", k)
	}
	ev := string(Adapter{}.RealtimeError(&adapters.Error{Type: adapters.ErrInsufficientQuota, Code: "insufficient_quota", Message: "out"}))
	if !strings.Contains(ev, `"type":"error"`) || !strings.Contains(ev, `"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"out","param":null,"event_id":null}`) {
		t.Errorf("error event %s", ev)
	}
}
