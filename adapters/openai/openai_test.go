package openai_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		op           adapters.Operation
		ok           bool
	}{
		{"POST", "/v1/chat/completions", adapters.OpChat, true},
		{"POST", "/v1/completions", adapters.OpCompletion, true},
		{"POST", "/v1/embeddings", adapters.OpEmbedding, true},
		{"POST", "/v1/engines/text-embedding-ada-002/embeddings", adapters.OpEmbedding, true},
		{"POST", "/v1/engines//embeddings", adapters.OpUnknown, true},
		{"POST", "/v1/engines/a/b/embeddings", adapters.OpUnknown, true},
		{"GET", "/v1/models", adapters.OpListModels, true},
		{"GET", "/v1/models/gpt-4o", adapters.OpGetModel, true},
		{"GET", "/v1/models/", adapters.OpUnknown, true},
		{"GET", "/v1/chat/completions", adapters.OpUnknown, true},
		{"POST", "/v1/images/generations", adapters.OpImage, true},
		{"POST", "/v1/audio/speech", adapters.OpSpeech, true},
		{"POST", "/v1/audio/transcriptions", adapters.OpTranscription, true},
		{"POST", "/v1/rerank", adapters.OpRerank, true},
		{"POST", "/v1/responses", adapters.OpResponses, true},
		{"POST", "/v1/assistants", adapters.OpUnknown, true},
		{"POST", "/chat/completions", "", false},
		{"POST", "/v1beta/models/g:generateContent", "", false},
	}
	for _, tt := range tests {
		op, ok := oai.Route(httptest.NewRequest(tt.method, tt.path, nil))
		if op != tt.op || ok != tt.ok {
			t.Errorf("%s %s: got %q %v, want %q %v", tt.method, tt.path, op, ok, tt.op, tt.ok)
		}
	}
}

func TestCredential(t *testing.T) {
	r := post("/v1/chat/completions", "Authorization", "Bearer  sk-gw ")
	if got := oai.Credential(r); got != "sk-gw" {
		t.Errorf("bearer: %q", got)
	}
	r = post("/v1/chat/completions", "Authorization", "bearer sk-gw")
	if got := oai.Credential(r); got != "sk-gw" {
		t.Errorf("lowercase bearer: %q", got)
	}
	r = post("/v1/chat/completions", "x-api-key", "sk-gw")
	if got := oai.Credential(r); got != "" {
		t.Errorf("x-api-key is not OpenAI's: %q", got)
	}
}

// Every 400 of DecodeRequest says which field is wrong.
func TestDecodeRequestErrors(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	chat := func(extra string, msgs ...string) string {
		if len(msgs) == 0 {
			msgs = []string{user}
		}
		return `{"model":"m",` + extra + `"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	tests := []struct {
		name string
		op   adapters.Operation
		body string
		want string
	}{
		{"empty", adapters.OpChat, ``, "empty"},
		{"blank", adapters.OpChat, " \n", "empty"},
		{"not json", adapters.OpChat, `{"model":`, "not valid JSON"},
		{"not an object", adapters.OpChat, `[]`, "'body'"},
		{"model type", adapters.OpChat, `{"model":4,"messages":[` + user + `]}`, "'model'"},
		{"no model", adapters.OpChat, `{"messages":[` + user + `]}`, "'model' is required"},
		{"no messages", adapters.OpChat, `{"model":"m"}`, "'messages'"},
		{"empty messages", adapters.OpChat, `{"model":"m","messages":[]}`, "'messages'"},
		{"messages type", adapters.OpChat, `{"model":"m","messages":{}}`, "'messages'"},
		{"temperature type", adapters.OpChat, chat(`"temperature":"hot",`), "'temperature'"},
		{"max_tokens type", adapters.OpChat, chat(`"max_tokens":"ten",`), "'max_tokens'"},
		{"stream type", adapters.OpChat, chat(`"stream":"yes",`), "'stream'"},
		{"stop type", adapters.OpChat, chat(`"stop":5,`), "'stop'"},
		{"stop items", adapters.OpChat, chat(`"stop":[1],`), "'stop'"},
		{"content type", adapters.OpChat, chat(``, `{"role":"user","content":5}`), "content"},
		{"no role", adapters.OpChat, chat(``, `{"content":"hi"}`), "'messages[0].role' is required"},
		{"bad role", adapters.OpChat, chat(``, user, `{"role":"robot","content":"hi"}`), "'messages[1].role'"},
		{"no part type", adapters.OpChat, chat(``, `{"role":"user","content":[{"text":"hi"}]}`), "'messages[0].content[0].type'"},
		{"no image url", adapters.OpChat, chat(``, `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}}]}`), "'messages[0].content[1].image_url.url'"},
		{"no image_url", adapters.OpChat, chat(``, `{"role":"user","content":[{"type":"image_url"}]}`), "'messages[0].content[0].image_url.url'"},
		{"ftp image", adapters.OpChat, chat(``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}`), "'messages[0].content[0].image_url.url'"},
		{"data url not base64", adapters.OpChat, chat(``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}`), "'messages[0].content[0].image_url.url'"},
		{"bad base64", adapters.OpChat, chat(``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!"}}]}`), "'messages[0].content[0].image_url.url'"},
		{"assistant image url", adapters.OpChat, chat(``, user, `{"role":"assistant","content":[{"type":"image_url","image_url":{"url":""}}]}`), "'messages[1].content[0].image_url.url'"},
		{"no tool_call_id", adapters.OpChat, chat(``, user, `{"role":"tool","content":"18C"}`), "'messages[1].tool_call_id'"},
		{"tool_calls type", adapters.OpChat, chat(``, `{"role":"assistant","tool_calls":{}}`), "tool_calls"},
		{"tool name", adapters.OpChat, chat(`"tools":[{"type":"function","function":{"description":"x"}}],`), "'tools[0].function.name'"},
		{"tools type", adapters.OpChat, chat(`"tools":{},`), "'tools'"},
		{"tool_choice word", adapters.OpChat, chat(`"tool_choice":"any",`), "'tool_choice'"},
		{"tool_choice object", adapters.OpChat, chat(`"tool_choice":{"type":"function"},`), "'tool_choice.function.name' is required"},
		{"tool_choice number", adapters.OpChat, chat(`"tool_choice":1,`), "'tool_choice'"},
		{"response_format type", adapters.OpChat, chat(`"response_format":{"type":"xml"},`), "'response_format.type'"},
		{"response_format shape", adapters.OpChat, chat(`"response_format":"json",`), "'response_format'"},
		{"stream_options type", adapters.OpChat, chat(`"stream_options":true,`), "'stream_options'"},

		{"completion empty", adapters.OpCompletion, ``, "empty"},
		{"completion no prompt", adapters.OpCompletion, `{"model":"m"}`, "'prompt' is required"},
		{"completion empty prompt", adapters.OpCompletion, `{"model":"m","prompt":[]}`, "'prompt' must not be empty"},
		{"completion prompt type", adapters.OpCompletion, `{"model":"m","prompt":{}}`, "'prompt'"},
		{"completion no model", adapters.OpCompletion, `{"prompt":"hi"}`, "'model' is required"},

		{"embedding empty", adapters.OpEmbedding, ``, "empty"},
		{"embedding no input", adapters.OpEmbedding, `{"model":"m"}`, "'input' is required"},
		{"embedding null input", adapters.OpEmbedding, `{"model":"m","input":null}`, "'input' is required"},
		{"embedding empty input", adapters.OpEmbedding, `{"model":"m","input":[]}`, "'input' must not be empty"},
		{"embedding input type", adapters.OpEmbedding, `{"model":"m","input":{"text":"a"}}`, "'input'"},
		{"embedding mixed input", adapters.OpEmbedding, `{"model":"m","input":["a",1]}`, "'input'"},
		{"embedding encoding_format", adapters.OpEmbedding, `{"model":"m","input":"a","encoding_format":"int8"}`, "'encoding_format'"},
		{"embedding dimensions type", adapters.OpEmbedding, `{"model":"m","input":"a","dimensions":"256"}`, "'dimensions'"},
		{"embedding no model", adapters.OpEmbedding, `{"input":"a"}`, "'model' is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oai.DecodeRequest(tt.op, []byte(tt.body), post("/v1/chat/completions"))
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %#v, want a 400 saying %q", err, tt.want)
			}
		})
	}
	// an operation the dialect routes but does not decode is a 404
	_, err := oai.DecodeRequest(adapters.OpUpgrade, []byte(`{"model":"gpt-4o"}`), post("/v1/responses"))
	var e *adapters.Error
	if !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("upgrade: %#v", err)
	}
}

// tool_choice in each of its forms.
func TestToolChoice(t *testing.T) {
	tests := []struct {
		raw  string
		want *adapters.ToolChoice
	}{
		{`"auto"`, &adapters.ToolChoice{Mode: adapters.ToolChoiceAuto}},
		{`"none"`, &adapters.ToolChoice{Mode: adapters.ToolChoiceNone}},
		{`"required"`, &adapters.ToolChoice{Mode: adapters.ToolChoiceRequired}},
		{`{"type":"function","function":{"name":"get_weather"}}`, &adapters.ToolChoice{Mode: adapters.ToolChoiceTool, Name: "get_weather"}},
		{`null`, nil},
	}
	for _, tt := range tests {
		body := `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":` + tt.raw + `,"messages":[{"role":"user","content":"hi"}]}`
		req, err := oai.DecodeRequest(adapters.OpChat, []byte(body), post("/v1/chat/completions"))
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if !reflect.DeepEqual(req.Chat.ToolChoice, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.raw, req.Chat.ToolChoice, tt.want)
		}
	}
}

// Legacy completions and embeddings in their accepted forms.
func TestDecodeCompletionAndEmbedding(t *testing.T) {
	completions := []struct {
		body         string
		prompt       []string
		stream, incl bool
	}{
		{`{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7}`, []string{"Say this is a test"}, false, false},
		{`{"model":"gpt-3.5-turbo-instruct","prompt":["a","b"],"stream":true,"stream_options":{"include_usage":true}}`, []string{"a", "b"}, true, true},
	}
	for _, tt := range completions {
		req, err := oai.DecodeRequest(adapters.OpCompletion, []byte(tt.body), post("/v1/completions"))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if req.Op != adapters.OpCompletion || req.Model != "gpt-3.5-turbo-instruct" || !reflect.DeepEqual(req.Completion.Prompt, tt.prompt) ||
			req.Stream != tt.stream || req.IncludeUsage != tt.incl || string(req.Raw) != tt.body {
			t.Errorf("%s: %+v %+v", tt.body, req, req.Completion)
		}
	}

	dims := int64(256)
	embeddings := []struct {
		path, body string
		model      string
		want       adapters.EmbeddingRequest
	}{
		{"/v1/embeddings", `{"model":"e","input":"The food was delicious"}`, "e", adapters.EmbeddingRequest{Input: []string{"The food was delicious"}}},
		{"/v1/embeddings", `{"model":"e","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`, "e",
			adapters.EmbeddingRequest{Input: []string{"a", "b"}, EncodingFormat: "base64", Dimensions: &dims}},
		// token input is counted one token per id
		{"/v1/embeddings", `{"model":"e","input":[1212,318,257]}`, "e", adapters.EmbeddingRequest{Input: []string{"x x x "}}},
		{"/v1/embeddings", `{"model":"e","input":[[1212,318],[257]],"encoding_format":"float"}`, "e",
			adapters.EmbeddingRequest{Input: []string{"x x ", "x "}, EncodingFormat: "float"}},
		// the path names the model
		{"/v1/engines/text-embedding-ada-002/embeddings", `{"input":"hi"}`, "text-embedding-ada-002", adapters.EmbeddingRequest{Input: []string{"hi"}}},
	}
	for _, tt := range embeddings {
		req, err := oai.DecodeRequest(adapters.OpEmbedding, []byte(tt.body), post(tt.path))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if req.Model != tt.model || !reflect.DeepEqual(*req.Embedding, tt.want) {
			t.Errorf("%s %s: model %q, %+v", tt.path, tt.body, req.Model, *req.Embedding)
		}
	}
	// without an *http.Request (as the relay's tests call it) nothing panics
	if _, err := oai.DecodeRequest(adapters.OpEmbedding, []byte(`{"model":"e","input":"a"}`), nil); err != nil {
		t.Error(err)
	}
}

// The client's headers travel with the request, for a same-dialect upstream.
func TestDecodeRequestKeepsHeader(t *testing.T) {
	r := post("/v1/chat/completions", "OpenAI-Beta", "assistants=v2")
	req, err := oai.DecodeRequest(adapters.OpChat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), r)
	if err != nil || req.Header.Get("OpenAI-Beta") != "assistants=v2" || req.Dialect != openai.Name {
		t.Errorf("%v %+v", err, req)
	}
}

// What other dialects send that OpenAI cannot take is refused with a 400
// that names it, never dropped.
func TestEncodeChatRequestRefusals(t *testing.T) {
	user := adapters.Message{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "hi"}}}
	png := &adapters.Image{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}
	tests := []struct {
		name string
		chat *adapters.ChatRequest
		want string
	}{
		{"no chat", nil, "no conversation"},
		{"built-in tool", &adapters.ChatRequest{Messages: []adapters.Message{user}, Tools: []adapters.Tool{{Type: "googleSearch", Name: "googleSearch"}}}, "googleSearch"},
		{"document part", &adapters.ChatRequest{Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: "document"}}}}}, `"document"`},
		{"tool result image", &adapters.ChatRequest{Messages: []adapters.Message{user, {Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartToolResult, ToolResult: &adapters.ToolResult{CallID: "c", Content: []adapters.Part{{Type: adapters.PartImage, Image: png}}}}}}}}, "tool messages take text only"},
		{"assistant image", &adapters.ChatRequest{Messages: []adapters.Message{user, {Role: adapters.RoleAssistant, Parts: []adapters.Part{{Type: adapters.PartImage, Image: png}}}}}, "assistant message with image"},
		{"unknown role", &adapters.ChatRequest{Messages: []adapters.Message{{Role: "narrator", Parts: user.Parts}}}, `"narrator"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.EncodeChatRequest(&adapters.Request{Op: adapters.OpChat, Dialect: "translated", Chat: tt.chat}, "gpt-4o")
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %v, want a 400 saying %q", err, tt.want)
			}
		})
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   adapters.Error
	}{
		{401, `{"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			adapters.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys."}},
		{400, `{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error","param":"foo","code":null}}`,
			adapters.Error{Status: 400, Type: "invalid_request_error", Param: "foo", Message: "Unrecognized request argument supplied: foo"}},
		{429, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			adapters.Error{Status: 429, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota.", Fault: adapters.FaultChannel}},
		// a compatible server's numeric code and missing type
		{503, `{"error":{"message":"busy","code":503}}`, adapters.Error{Status: 503, Type: "overloaded_error", Message: "busy"}},
		// not the envelope
		{502, `<html><body>502 Bad Gateway</body></html>`, adapters.Error{Status: 502, Type: "api_error", Message: "upstream answered HTTP 502"}},
		{500, ``, adapters.Error{Status: 500, Type: "api_error", Message: "upstream answered HTTP 500"}},
		{404, `{"error":{"message":""}}`, adapters.Error{Status: 404, Type: "not_found_error", Message: "upstream answered HTTP 404"}},
		{429, `{"detail":"rate limited"}`, adapters.Error{Status: 429, Type: "rate_limit_error", Message: "upstream answered HTTP 429"}},
	}
	for _, tt := range tests {
		if got := prov.DecodeError(tt.status, []byte(tt.body)); *got != tt.want {
			t.Errorf("%d %s:\ngot  %+v\nwant %+v", tt.status, tt.body, *got, tt.want)
		}
	}
}

func TestEncodeError(t *testing.T) {
	tests := []struct {
		in   adapters.Error
		want string
	}{
		{adapters.Error{Status: 400, Type: "invalid_request_error", Message: "bad", Param: "messages", Code: "bad_messages"},
			`{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"bad_messages"}}`},
		{adapters.Error{Status: 401, Message: "no key"}, `{"error":{"message":"no key","type":"authentication_error","param":null,"code":null}}`},
		{adapters.Error{Status: 529, Message: "busy"}, `{"error":{"message":"busy","type":"overloaded_error","param":null,"code":null}}`},
	}
	for _, tt := range tests {
		if got := string(oai.EncodeError(&tt.in)); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
		// in a stream, the same object as one data frame
		if got := string(oai.NewStreamEncoder(&adapters.Request{}).Error(nil, &tt.in)); got != "data: "+tt.want+"\n\n" {
			t.Errorf("stream error %q", got)
		}
	}
}

func TestModels(t *testing.T) {
	models := []adapters.ModelInfo{{ID: "gpt-4o", OwnedBy: "openai", Created: 1715367049}, {ID: "claude-x", OwnedBy: "anthropic"}}
	want := `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"openai"},{"id":"claude-x","object":"model","created":0,"owned_by":"anthropic"}]}`
	if got := string(oai.EncodeModels(models)); got != want {
		t.Errorf("models:\n%s\n%s", got, want)
	}
	if got := string(oai.EncodeModels(nil)); got != `{"object":"list","data":[]}` {
		t.Errorf("empty: %s", got)
	}
	if got := string(openai.Adapter{}.EncodeModel(models[0])); got != `{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"openai"}` {
		t.Errorf("model: %s", got)
	}
}

func TestParseImageURL(t *testing.T) {
	img, err := openai.ParseImageURL("data:image/jpeg;base64,/9j/4AAQ")
	if err != nil || img.MediaType != "image/jpeg" || string(img.Data) != "\xff\xd8\xff\xe0\x00\x10" || img.URL != "" {
		t.Errorf("data URL: %v %+v", err, img)
	}
	img, err = openai.ParseImageURL("https://example.com/a.png?x=1")
	if err != nil || img.URL != "https://example.com/a.png?x=1" || img.Data != nil {
		t.Errorf("https URL: %v %+v", err, img)
	}
	for _, bad := range []string{"", "file:///etc/passwd", "data:image/png;base64", "data:image/png,AAAA", "data:image/png;base64,%%%"} {
		if _, err := openai.ParseImageURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
