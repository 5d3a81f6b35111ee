package gatewaytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// FakeBedrock is an upstream that speaks Amazon Bedrock Runtime's Converse
// API as its reference describes it: POST /model/{modelId}/converse (JSON)
// and /converse-stream (the event-stream framing: messageStart,
// contentBlockStart/Delta/Stop, messageStop, metadata, and exception
// frames). It checks what the real service checks: a SigV4 signature over
// the signed headers and the body's hash, recomputed from the credentials
// it was given (a wrong one is refused with 403 InvalidSignatureException,
// an unknown key id or session token with UnrecognizedClientException), or
// a Bedrock API key as a Bearer token; and it refuses what Converse
// refuses: members it does not know, roles that do not alternate or start
// with the assistant, tool blocks without a toolConfig, tool results that
// do not answer the previous turn's toolUse blocks. Errors are written as
// Bedrock writes them: the exception's name in x-amzn-errortype and
// {"message": ...}.
type FakeBedrock struct {
	*httptest.Server
	Region string
	// Credentials are the SigV4 credentials it accepts (AccessKeyID empty:
	// none); APIKey the Bedrock API key it accepts ("" : none).
	Credentials aws.Credentials
	APIKey      string
	recorder
	bb    BedrockBehavior
	batch fakeBedrockBatches
}

// BedrockBehavior is what only a Bedrock fake does.
type BedrockBehavior struct {
	// Exception names the error answered with FailStatus
	// (ThrottlingException, ...); empty: the usual one for the status.
	Exception string
	// StreamException is sent as an exception frame (its :exception-type,
	// e.g. throttlingException) after ExceptionAfter frames of a stream,
	// which then ends.
	StreamException string
	ExceptionAfter  int
}

var _ Fake = (*FakeBedrock)(nil)

// NewFakeBedrock starts a fake for region that accepts creds (SigV4) and,
// when apiKey is set, that Bedrock API key.
func NewFakeBedrock(t testing.TB, region string, creds aws.Credentials, apiKey string) *FakeBedrock {
	Secret(creds.SecretAccessKey)
	Secret(creds.SessionToken)
	Secret(apiKey)
	f := &FakeBedrock{Region: region, Credentials: creds, APIKey: apiKey}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeBedrock) BaseURL() string { return f.URL }

// SetBedrock changes the Bedrock-only behaviour under the lock.
func (f *FakeBedrock) SetBedrock(change func(b *BedrockBehavior)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.bb)
}

func (f *FakeBedrock) bedrockBehavior() BedrockBehavior {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bb
}

// exceptionOf is the exception Bedrock names for a status.
var exceptionOf = map[int]string{
	400: "ValidationException",
	403: "AccessDeniedException",
	404: "ResourceNotFoundException",
	408: "ModelTimeoutException",
	424: "ModelErrorException",
	429: "ThrottlingException",
	500: "InternalServerException",
	503: "ServiceUnavailableException",
}

// bedrockError writes an error as Bedrock Runtime does.
func bedrockError(w http.ResponseWriter, status int, exception, msg string) {
	if exception == "" {
		exception = exceptionOf[status]
	}
	w.Header().Set("X-Amzn-Errortype", exception+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("fake-bedrock-%d", fakeRequestIDs.Add(1)))
	writeJSONStatus(w, status, map[string]string{"message": msg})
}

// authorize checks the request's credentials as Bedrock does; false when
// it has answered with the refusal.
func (f *FakeBedrock) authorize(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return f.authorizeFor(w, r, body, "bedrock")
}

// authorizeFor checks a signature for service: "bedrock", or "s3", whose
// canonical path is not escaped again, which takes no API key, and which
// wants the body's hash in x-amz-content-sha256.
func (f *FakeBedrock) authorizeFor(w http.ResponseWriter, r *http.Request, body []byte, service string) bool {
	fail := bedrockError
	if service == "s3" {
		fail = s3Error // S3 writes its errors in XML
	}
	auth := r.Header.Get("Authorization")
	if key, ok := strings.CutPrefix(auth, "Bearer "); ok && service != "s3" {
		if f.APIKey == "" || key != f.APIKey {
			fail(w, 403, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return false
		}
		return true
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		fail(w, 403, "AccessDeniedException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
		return false
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		fail(w, 403, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
		return false
	}
	if f.Credentials.AccessKeyID == "" || scope[0] != f.Credentials.AccessKeyID ||
		r.Header.Get("X-Amz-Security-Token") != f.Credentials.SessionToken {
		fail(w, 403, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	}
	if scope[2] != f.Region || scope[3] != service || scope[4] != "aws4_request" {
		fail(w, 403, "InvalidSignatureException", fmt.Sprintf("Credential should be scoped to a valid region and service '%s' in %s.", service, f.Region))
		return false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || scope[1] != at.Format("20060102") {
		fail(w, 403, "IncompleteSignatureException", "Date must be in ISO-8601 'basic format'.")
		return false
	}
	if d := time.Since(at); d > 5*time.Minute || d < -5*time.Minute {
		fail(w, 403, "InvalidSignatureException", "Signature expired: the request's date is more than 5 minutes from the server's time.")
		return false
	}
	// the canonical request again, from the signed headers only, and the
	// body as it arrived
	re := &http.Request{Method: r.Method, URL: &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host: r.Host, Header: http.Header{}}
	for _, name := range strings.Split(fields["SignedHeaders"], ";") {
		switch name {
		case "host":
		case "content-length":
			re.ContentLength = r.ContentLength
		default:
			re.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	sum := sha256.Sum256(body)
	var opts []func(*v4.SignerOptions)
	if service == "s3" {
		if r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]) {
			fail(w, 400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
			return false
		}
		opts = append(opts, func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	}
	if err := v4.NewSigner(opts...).SignHTTP(context.Background(), f.Credentials, re, hex.EncodeToString(sum[:]), service, f.Region, at); err != nil {
		fail(w, 500, "InternalServerException", err.Error())
		return false
	}
	if re.Header.Get("Authorization") != auth {
		fail(w, 403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
		return false
	}
	return true
}

// bedrockBlock is a Converse content block, as the fake reads it.
type bedrockBlock struct {
	Text  *string `json:"text"`
	Image *struct {
		Format string `json:"format"`
		Source struct {
			Bytes []byte `json:"bytes"`
		} `json:"source"`
	} `json:"image"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ToolResult *struct {
		ToolUseID string `json:"toolUseId"`
		Content   []struct {
			Text *string `json:"text"`
		} `json:"content"`
	} `json:"toolResult"`
	ReasoningContent json.RawMessage `json:"reasoningContent"`
}

// converseMembers are the request members Converse knows.
var converseMembers = []string{"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
	"additionalModelRequestFields", "additionalModelResponseFieldPaths", "promptVariables", "requestMetadata", "performanceConfig"}

func (f *FakeBedrock) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if f.serveBatch(w, r, raw) {
		return
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	cfg, i := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	bb := f.bedrockBehavior()
	if !f.authorize(w, r, raw) {
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/model/")
	model, op, _ := strings.Cut(rest, "/")
	if ok && r.Method == http.MethodPost && op == "invoke" && cfg.FailStatus == 0 {
		f.invoke(w, model, raw, &cfg)
		return
	}
	if !ok || r.Method != http.MethodPost || (op != "converse" && op != "converse-stream") {
		bedrockError(w, 404, "UnknownOperationException", "Unknown operation")
		return
	}
	if cfg.FailStatus != 0 {
		bedrockError(w, cfg.FailStatus, bb.Exception, "The fake upstream was told to fail.")
		return
	}
	for k := range body {
		if !slices.Contains(converseMembers, k) {
			bedrockError(w, 400, "", fmt.Sprintf("Malformed input request: extraneous key [%s] is not permitted, please reformat your input and try again.", k))
			return
		}
	}
	var req struct {
		Messages []struct {
			Role    string         `json:"role"`
			Content []bedrockBlock `json:"content"`
		} `json:"messages"`
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		ToolConfig *struct {
			Tools []struct {
				ToolSpec struct {
					Name        string `json:"name"`
					InputSchema struct {
						JSON json.RawMessage `json:"json"`
					} `json:"inputSchema"`
				} `json:"toolSpec"`
			} `json:"tools"`
		} `json:"toolConfig"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Messages) == 0 {
		bedrockError(w, 400, "", "A conversation must start with a user message. Try again with a conversation that starts with a user message.")
		return
	}
	rec := f.Requests()[i]
	rec.Model, rec.Stream = model, op == "converse-stream"
	for _, s := range req.System {
		rec.System += s.Text
	}
	if req.ToolConfig != nil {
		for _, t := range req.ToolConfig.Tools {
			if len(t.ToolSpec.InputSchema.JSON) == 0 {
				bedrockError(w, 400, "", "The value at toolConfig.tools."+t.ToolSpec.Name+".toolSpec.inputSchema.json must be defined.")
				return
			}
			rec.Tools = append(rec.Tools, t.ToolSpec.Name)
		}
	}
	var lastUses []string
	for i, m := range req.Messages {
		if (i == 0 && m.Role != "user") || (i > 0 && m.Role == req.Messages[i-1].Role) {
			bedrockError(w, 400, "", "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.")
			return
		}
		if len(m.Content) == 0 {
			bedrockError(w, 400, "", fmt.Sprintf("The content field in the Message object at messages.%d is empty. Add a ContentBlock object to the content field and try again.", i))
			return
		}
		var answered, results []string
		uses := []string{}
		for _, b := range m.Content {
			switch {
			case b.Text != nil && m.Role == "user" && i == 0:
				rec.Prompt += *b.Text
			case b.Image != nil && i == 0:
				rec.Image = b.Image.Source.Bytes
			case b.ToolUse != nil:
				uses = append(uses, b.ToolUse.ToolUseID)
			case b.ToolResult != nil:
				answered = append(answered, b.ToolResult.ToolUseID)
				for _, c := range b.ToolResult.Content {
					if c.Text != nil {
						results = append(results, *c.Text)
					}
				}
			}
		}
		if (len(uses) > 0 || len(answered) > 0) && req.ToolConfig == nil {
			bedrockError(w, 400, "", "The toolConfig field must be defined when using toolUse and toolResult content blocks.")
			return
		}
		if m.Role == "assistant" {
			lastUses = uses
			continue
		}
		if len(answered) > 0 || len(lastUses) > 0 {
			if strings.Join(answered, ",") != strings.Join(lastUses, ",") {
				bedrockError(w, 400, "", fmt.Sprintf("Expected toolResult blocks at messages.%d.content for the following Ids: %s", i, strings.Join(lastUses, ", ")))
				return
			}
		}
		rec.Results, lastUses = results, nil
	}
	f.update(i, &rec)
	f.answer(r.Context(), w, &cfg, &bb, &rec)
}

func (f *FakeBedrock) answer(ctx context.Context, w http.ResponseWriter, cfg *Behavior, bb *BedrockBehavior, rec *Recorded) {
	text, calls := answer(cfg, rec)
	stop := "end_turn"
	content := []any{map[string]any{"text": text}}
	for i, c := range calls {
		stop = "tool_use"
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": fmt.Sprintf("tooluse_fake%d", i+1), "name": c.Name, "input": json.RawMessage(c.Args)}})
	}
	// inputTokens are the prompt tokens not read from the cache
	usage := map[string]any{"inputTokens": cfg.PromptTokens - cfg.CachedTokens - cfg.CacheWriteTokens, "outputTokens": cfg.CompletionTokens,
		"totalTokens": cfg.PromptTokens + cfg.CompletionTokens, "cacheReadInputTokens": cfg.CachedTokens, "cacheWriteInputTokens": cfg.CacheWriteTokens}
	if cfg.CacheWriteTokens > 0 {
		// the writes by TTL, 1h before 5m, as TokenUsage.cacheDetails lists them
		usage["cacheDetails"] = []any{map[string]any{"inputTokens": cfg.CacheWrite1hTokens, "ttl": "1h"},
			map[string]any{"inputTokens": cfg.CacheWriteTokens - cfg.CacheWrite1hTokens, "ttl": "5m"}}
	}
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("fake-bedrock-%d", fakeRequestIDs.Add(1)))
	if !rec.Stream {
		out := map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "metrics": map[string]any{"latencyMs": 12}}
		if !cfg.NoUsage {
			out["usage"] = usage
		}
		writeJSONStatus(w, 200, out)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	s := &eventWriter{ctx: ctx, w: w, enc: eventstream.NewEncoder(), cfg: cfg, bb: bb}
	if s.event("messageStart", map[string]any{"role": "assistant"}) {
		return
	}
	for _, word := range splitWords(text) {
		if s.event("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": word}}) {
			return
		}
	}
	if s.event("contentBlockStop", map[string]any{"contentBlockIndex": 0}) {
		return
	}
	for i, c := range calls {
		if s.event("contentBlockStart", map[string]any{"contentBlockIndex": i + 1, "start": map[string]any{"toolUse": map[string]any{"toolUseId": fmt.Sprintf("tooluse_fake%d", i+1), "name": c.Name}}}) {
			return
		}
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			if s.event("contentBlockDelta", map[string]any{"contentBlockIndex": i + 1, "delta": map[string]any{"toolUse": map[string]any{"input": part}}}) {
				return
			}
		}
		if s.event("contentBlockStop", map[string]any{"contentBlockIndex": i + 1}) {
			return
		}
	}
	if s.event("messageStop", map[string]any{"stopReason": stop}) {
		return
	}
	meta := map[string]any{"metrics": map[string]any{"latencyMs": 12}}
	if !cfg.NoUsage {
		meta["usage"] = usage
	}
	s.event("metadata", meta)
}

// eventWriter writes a ConverseStream answer's frames, with the faults
// the test asked for.
type eventWriter struct {
	ctx context.Context
	w   http.ResponseWriter
	enc *eventstream.Encoder
	cfg *Behavior
	bb  *BedrockBehavior
	n   int
}

// padding is the "p" member Bedrock adds to every event to hide its length.
const padding = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// event writes one event frame and flushes it; true when the stream is
// over (a fault the test asked for).
func (s *eventWriter) event(typ string, payload map[string]any) bool {
	if s.bb.StreamException != "" && s.n == s.bb.ExceptionAfter {
		s.frame("exception", s.bb.StreamException, map[string]any{"message": "The fake upstream was told to fail the stream."})
		return true
	}
	if s.cfg.BreakAfter > 0 && s.n >= s.cfg.BreakAfter {
		panic(http.ErrAbortHandler) // drop the connection
	}
	if s.cfg.HangAfter > 0 && s.n >= s.cfg.HangAfter {
		<-s.ctx.Done()
		return true
	}
	if s.cfg.ChunkDelay > 0 {
		time.Sleep(s.cfg.ChunkDelay)
	}
	payload["p"] = padding[:1+s.n%len(padding)]
	s.frame("event", typ, payload)
	s.n++
	return false
}

func (s *eventWriter) frame(kind, typ string, payload map[string]any) {
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue(kind))
	if kind == "event" {
		m.Headers.Set(":event-type", eventstream.StringValue(typ))
	} else {
		m.Headers.Set(":exception-type", eventstream.StringValue(typ))
	}
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload, _ = json.Marshal(payload)
	var buf bytes.Buffer
	_ = s.enc.Encode(&buf, m)
	_, _ = s.w.Write(buf.Bytes())
	s.w.(http.Flusher).Flush()
}

// invoke answers InvokeModel for the embedding models it knows, in their
// own bodies: Titan Text Embeddings (one inputText; a vector of
// "dimensions", default 1024, and inputTextTokenCount = the prompt
// tokens) and Cohere Embed (texts; 1024 floats each, no token count).
// Vector i's first value is i+1, so a test sees the order kept.
func (f *FakeBedrock) invoke(w http.ResponseWriter, model string, raw []byte, cfg *Behavior) {
	vector := func(i, n int) []float32 {
		v := make([]float32, n)
		v[0] = float32(i + 1)
		return v
	}
	switch {
	case strings.HasPrefix(model, "amazon.titan-embed-text"):
		var req struct {
			InputText  *string `json:"inputText"`
			Dimensions *int    `json:"dimensions"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.InputText == nil {
			bedrockError(w, 400, "", "Malformed input request: #: required key [inputText] not found, please reformat your input and try again.")
			return
		}
		n := 1024
		if req.Dimensions != nil {
			n = *req.Dimensions
		}
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("fake-bedrock-%d", fakeRequestIDs.Add(1)))
		writeJSONStatus(w, 200, map[string]any{"embedding": vector(0, n), "inputTextTokenCount": cfg.PromptTokens})
	case strings.HasPrefix(model, "cohere.embed-"):
		var req struct {
			Texts     []string `json:"texts"`
			InputType string   `json:"input_type"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || len(req.Texts) == 0 || req.InputType == "" {
			bedrockError(w, 400, "", "Malformed input request: #: required key [input_type] not found, please reformat your input and try again.")
			return
		}
		out := make([][]float32, len(req.Texts))
		for i := range out {
			out[i] = vector(i, 1024)
		}
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("fake-bedrock-%d", fakeRequestIDs.Add(1)))
		writeJSONStatus(w, 200, map[string]any{"embeddings": out, "id": "fake-embed-1", "response_type": "embeddings_floats", "texts": req.Texts})
	default:
		bedrockError(w, 400, "", "The provided model identifier is invalid.")
	}
}
