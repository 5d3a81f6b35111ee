package openai

import (
	"encoding/base64"
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
	r := httptest.NewRequest(http.MethodGet, "/v1/realtime?model=m", nil)
	s := Adapter{}.RealtimeSession(r, adapters.RealtimeLimits{MaxOutputTokens: 1000})
	ev := s.ServerEvent([]byte(responseDoneEvent))
	want := adapters.Usage{PromptTokens: 132, CachedTokens: 64, AudioPromptTokens: 13, CompletionTokens: 121, AudioCompletionTokens: 91}
	if ev.Kind != adapters.RealtimeResponseDone || ev.Usage != want || ev.ResponseID != "resp_001" {
		t.Errorf("usage %+v, want %+v", ev, want)
	}
	if ev := s.ServerEvent([]byte(`{"event_id":"e1","type":"response.created","response":{"id":"resp_1"}}`)); ev.Kind != adapters.RealtimeResponseStarted || ev.ResponseID != "resp_1" {
		t.Errorf("response.created read as %+v", ev)
	}
	for _, ev := range []string{
		`{"type":"response.audio.delta","delta":"AAAA"}`,
		`{"type":"conversation.item.created","item":{"content":[{"text":"\"response.done\""}]}}`,
		`not json "response.done"`,
	} {
		if got := s.ServerEvent([]byte(ev)); got.Kind != adapters.RealtimeOther {
			t.Errorf("%s read as %v", ev, got.Kind)
		}
	}
	if ev := s.ServerEvent([]byte(`{"type":"response.done","response":{"status":"failed","usage":null}}`)); ev.Kind != adapters.RealtimeResponseDone || ev.Usage.Known() {
		t.Errorf("a response.done without usage: %+v", ev)
	}
}

// Every output cap a client sets is kept at or under the limit, in either
// interface's spelling, and a response.create without one gets it.
func TestRealtimeCaps(t *testing.T) {
	ga := httptest.NewRequest(http.MethodGet, "/v1/realtime?model=m", nil)
	beta := httptest.NewRequest(http.MethodGet, "/v1/realtime?model=m", nil)
	beta.Header.Set("OpenAI-Beta", "realtime=v1")
	for _, c := range []struct {
		name     string
		r        *http.Request
		in, want string
		creates  bool
	}{
		{"ga setup", ga, "", `{"event_id":"event_gateway_limits","session":{"max_output_tokens":1000,"type":"realtime"},"type":"session.update"}`, false},
		{"beta setup", beta, "", `{"event_id":"event_gateway_limits","session":{"max_response_output_tokens":1000},"type":"session.update"}`, false},
		{"ga bare response", ga, `{"type":"response.create"}`, `{"type":"response.create","response":{"max_output_tokens":1000}}`, true},
		{"ga inf", ga, `{"type":"response.create","response":{"conversation":"none","max_output_tokens":"inf"}}`, `{"type":"response.create","response":{"conversation":"none","max_output_tokens":1000}}`, true},
		{"ga under", ga, `{"type":"response.create","response":{"max_output_tokens":200}}`, `{"type":"response.create","response":{"max_output_tokens":200}}`, true},
		// the beta's response.create names its cap max_output_tokens too
		{"beta bare response", beta, `{"type":"response.create","response":{"voice":"alloy"}}`, `{"type":"response.create","response":{"voice":"alloy","max_output_tokens":1000}}`, true},
		{"beta over", beta, `{"type":"response.create","response":{"max_response_output_tokens":5000}}`, `{"type":"response.create","response":{"max_response_output_tokens":1000}}`, true},
		{"beta session inf", beta, `{"type":"session.update","session":{"max_response_output_tokens":"inf","voice":"alloy"}}`, `{"type":"session.update","session":{"max_response_output_tokens":1000,"voice":"alloy"},"event_id":"event_gateway_update_1"}`, false},
		{"session untouched", ga, `{"type":"session.update","event_id":"e1","session":{"instructions":"hi"}}`, `{"type":"session.update","event_id":"e1","session":{"instructions":"hi"}}`, false},
		// the gateway's own setup id is not the client's to take
		{"session setup id", ga, `{"type":"session.update","event_id":"event_gateway_limits","session":{"instructions":"hi"}}`, `{"type":"session.update","event_id":"event_gateway_update_1","session":{"instructions":"hi"}}`, false},
		// an update is named, so that the upstream's refusal is told apart
		{"session named", ga, `{"type":"session.update","session":{"instructions":"hi"}}`, `{"type":"session.update","session":{"instructions":"hi"},"event_id":"event_gateway_update_1"}`, false},
	} {
		s := Adapter{}.RealtimeSession(c.r, adapters.RealtimeLimits{MaxOutputTokens: 1000})
		if c.in == "" {
			if got := string(s.Setup()); got != c.want {
				t.Errorf("%s: %s, want %s", c.name, got, c.want)
			}
			continue
		}
		out, ev, err := s.ClientEvent([]byte(c.in))
		if err != nil || string(out) != c.want || ev.CreatesResponse != c.creates {
			t.Errorf("%s: %s %+v %v, want %s", c.name, out, ev, err, c.want)
		}
	}
}

// Transcription is refused without a price, and with one the audio it
// will transcribe is measured in the session's input format, as the
// upstream accepted it: audio after an update waits for its answer, and
// an update the upstream refuses changes nothing.
func TestRealtimeTranscription(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/realtime?model=m", nil)
	on := `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}}}`
	s := Adapter{}.RealtimeSession(r, adapters.RealtimeLimits{MaxOutputTokens: 1000})
	if _, _, err := s.ClientEvent([]byte(on)); err == nil || err.Status != http.StatusBadRequest {
		t.Errorf("unpriced transcription: %v", err)
	}
	s = Adapter{}.RealtimeSession(r, adapters.RealtimeLimits{MaxOutputTokens: 1000, Transcription: true})
	second := `{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(make([]byte, 48000)) + `"}`
	if _, ev, _ := s.ClientEvent([]byte(second)); !ev.AwaitState {
		t.Errorf("audio before session.created: %+v", ev)
	}
	s.ServerEvent([]byte(`{"type":"session.created","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"transcription":null}}}}`))
	select {
	case <-s.Settled():
	default:
		t.Fatal("not settled after session.created")
	}
	if _, ev, _ := s.ClientEvent([]byte(second)); ev.TranscribedMillis != 0 || ev.AwaitState {
		t.Errorf("audio before transcription: %+v", ev)
	}
	updated := func(session string) { s.ServerEvent([]byte(`{"type":"session.updated","session":` + session + `}`)) }
	if _, _, err := s.ClientEvent([]byte(on)); err != nil {
		t.Fatal(err)
	}
	if _, ev, _ := s.ClientEvent([]byte(second)); !ev.AwaitState {
		t.Errorf("audio after an unanswered update: %+v", ev)
	}
	updated(`{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"transcription":{"model":"whisper-1"}}}}`)
	if _, ev, _ := s.ClientEvent([]byte(second)); ev.TranscribedMillis != 1000 {
		t.Errorf("a second of 24 kHz PCM: %+v", ev)
	}
	// refused: the client named it, the upstream's error names it back
	s.ClientEvent([]byte(`{"type":"session.update","event_id":"ev_off","session":{"type":"realtime","audio":{"input":{"transcription":null,"format":{"type":"audio/flac"}}}}}`))
	s.ServerEvent([]byte(`{"type":"error","error":{"type":"invalid_request_error","code":"invalid_value","message":"no","event_id":"ev_off"}}`))
	if _, ev, _ := s.ClientEvent([]byte(second)); ev.TranscribedMillis != 1000 {
		t.Errorf("after a refused update: %+v", ev)
	}
	// the gateway names an update the client did not
	out, _, _ := s.ClientEvent([]byte(`{"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcmu"}}}}}`))
	if !strings.Contains(string(out), `"event_id":"event_gateway_update_2"`) {
		t.Errorf("relayed %s", out)
	}
	updated(`{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcmu"},"transcription":{"model":"whisper-1"}}}}`)
	if _, ev, _ := s.ClientEvent([]byte(second)); ev.TranscribedMillis != 6000 {
		t.Errorf("48000 bytes of G.711: %+v", ev)
	}
	s.ClientEvent([]byte(`{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":null}}}}`))
	updated(`{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcmu"},"transcription":null}}}`)
	if _, ev, _ := s.ClientEvent([]byte(second)); ev.TranscribedMillis != 0 {
		t.Errorf("audio after transcription: %+v", ev)
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
