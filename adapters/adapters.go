// Package adapters holds the neutral request, response and stream-event
// types every vendor converts to and from, and the contracts a vendor
// family implements: Dialect (the shape clients speak to the gateway),
// Provider (what every upstream family is) and one capability interface per
// thing a family does (ChatProvider, RerankProvider, MediaProvider,
// RealtimeProvider, TaskProvider; see provider.go). Vendor detail lives
// in adapters/<vendor>/ only; this package must not import any of them, nor
// caddymodule or store.
//
// When a client's dialect and a channel's wire dialect are the same, nothing
// is translated: the provider sends the client's body with only the model
// name changed, and marks what it decodes with Raw and Dialect so the client's
// dialect writes the upstream's bytes back unchanged.
package adapters

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Operation is the kind of call a request makes, independent of dialect.
type Operation string

// Operations the relay knows. The engine sends an operation only to a
// family with its capability (see provider.go); within a capability a
// family that cannot serve one answers Unsupported from NewRequest.
const (
	OpChat          Operation = "chat"       // chat completions, messages, generateContent
	OpCompletion    Operation = "completion" // legacy text completions
	OpEmbedding     Operation = "embedding"
	OpCountTokens   Operation = "count_tokens"
	OpImage         Operation = "image"
	OpSpeech        Operation = "speech"
	OpTranscription Operation = "transcription"
	OpRerank        Operation = "rerank"
	OpResponses     Operation = "responses"
	OpListModels    Operation = "list_models" // GET a model list
	OpGetModel      Operation = "get_model"   // GET one model
	// OpUpgrade is a WebSocket upgrade on a path the gateway serves over
	// plain HTTP only: the relay answers 426 at once, which tells a client
	// that tries a socket first (Codex on /v1/responses) to use HTTP.
	OpUpgrade Operation = "upgrade"
	// OpRealtime is a WebSocket session (OpenAI's Realtime API): the
	// gateway upgrades it and relays frames both ways (RealtimeProvider).
	OpRealtime Operation = "realtime"
	// OpRealtimeClientSecret mints a short-lived secret a browser opens
	// Realtime sessions with (ClientSecretDialect).
	OpRealtimeClientSecret Operation = "realtime_client_secret"
	// OpUnknown is a path under a dialect's prefix that it does not serve:
	// the relay answers 404 in that dialect.
	OpUnknown Operation = "unknown"
)

// Request is a client's call, decoded once by its dialect.
type Request struct {
	Op      Operation
	Dialect string // name of the dialect the client spoke
	Model   string
	Stream  bool
	// IncludeUsage is true when the client itself asked for usage in the
	// stream (OpenAI's stream_options.include_usage). The gateway always asks
	// the upstream for usage; this says whether the client sees it.
	IncludeUsage bool
	// Raw is the body exactly as the client sent it, for passthrough.
	Raw []byte
	// OutputAllowance is the output limit the gateway reserved for a
	// request whose client set none: the model's maximum output, lowered to
	// what the caller's quota covers. A provider sends it as its vendor's
	// output limit (max_completion_tokens, max_tokens, maxOutputTokens) when
	// the request carries none, so the upstream cannot produce more than was
	// reserved. Zero: the provider's own default.
	OutputAllowance int64
	// Header holds the client's request headers that a same-dialect upstream
	// may need (anthropic-version, anthropic-beta, openai-beta).
	Header http.Header

	Chat       *ChatRequest       // OpChat, OpCountTokens, OpResponses
	Completion *CompletionRequest // OpCompletion
	Embedding  *EmbeddingRequest  // OpEmbedding
	Rerank     *RerankRequest     // OpRerank
	Media      *MediaRequest      // OpImage, OpSpeech, OpTranscription

	// Untranslatable lists what the client asked for that has no neutral
	// form (a stateful option, a hosted tool), each as the 400 that names
	// it. A same-dialect upstream gets the client's bytes and honours them;
	// a provider translating the request refuses it with the first.
	Untranslatable []*Error
}

// Translatable returns the first thing the request asked for that cannot
// be translated to another family, or nil.
func (r *Request) Translatable() error {
	if len(r.Untranslatable) > 0 {
		return r.Untranslatable[0]
	}
	return nil
}

// Conversation reports whether the operation carries a neutral ChatRequest
// that a provider of another family translates: chat, and OpenAI's
// Responses API.
func (op Operation) Conversation() bool { return op == OpChat || op == OpResponses }

// ChatRequest is a conversation in neutral form.
type ChatRequest struct {
	System   []Part // system instructions, text parts
	Messages []Message
	Tools    []Tool
	// ToolChoice is nil when the client left it to the model.
	ToolChoice        *ToolChoice
	ParallelToolCalls *bool

	MaxTokens        *int64
	Temperature      *float64
	TopP             *float64
	TopK             *int64
	Stop             []string
	N                *int64
	Seed             *int64
	PresencePenalty  *float64
	FrequencyPenalty *float64
	ResponseFormat   *ResponseFormat
	Reasoning        *Reasoning
	User             string
	// CacheKey is the client's name for its prompt cache (OpenAI's
	// prompt_cache_key), which also names the conversation for affinity.
	CacheKey string
	// Session is what the dialect's body says of the session it belongs
	// to (Anthropic's metadata.user_id, which Claude Code fills per
	// session): a weaker name for the conversation than a session header.
	Session string
}

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // a message carrying tool results only
	// RoleSystem is an instruction given mid-conversation, at its place
	// among the turns (instructions before the first turn go in System).
	RoleSystem = "system"
)

// Message is one turn of the conversation.
type Message struct {
	Role  string
	Parts []Part
}

// PartType says which field of a Part is set.
type PartType string

// Part types.
const (
	PartText       PartType = "text"
	PartImage      PartType = "image"
	PartToolCall   PartType = "tool_call"
	PartToolResult PartType = "tool_result"
	PartThinking   PartType = "thinking"
)

// Part is one piece of a message's content. A Type outside the constants
// above is a vendor's own part type (audio, file, document, ...), kept so
// that translating to a vendor that cannot take it refuses with a 400.
type Part struct {
	Type       PartType
	Text       string      // PartText; PartThinking's text
	Image      *Image      // PartImage
	ToolCall   *ToolCall   // PartToolCall
	ToolResult *ToolResult // PartToolResult
	// Signature is the opaque signature a vendor attaches to thinking
	// content so it can be sent back in a later turn.
	Signature string
	// Redacted holds a vendor's encrypted thinking, carried back verbatim.
	Redacted string
}

// Image is an image given inline (Data with MediaType) or by URL.
type Image struct {
	URL       string // http(s) URL; empty when Data is set
	MediaType string // e.g. image/png
	Data      []byte // decoded bytes
	Detail    string // OpenAI's low/high/auto hint, where known
}

// ToolCall is the model asking for a tool to run.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON object text
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	CallID  string
	Name    string // the tool's name, which some vendors need on results
	Content []Part // text and image parts
	IsError bool
}

// Tool is a function the model may call.
type Tool struct {
	// Type is "function" for a function tool; any other value is a vendor's
	// built-in tool, which only a same-dialect upstream can take.
	Type        string
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema object
	Strict      *bool
}

// ToolChoice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required" // any tool
	ToolChoiceTool     = "tool"     // the tool named in Name
)

// ToolChoice constrains tool use.
type ToolChoice struct {
	Mode string
	Name string
}

// ResponseFormat asks for JSON output.
type ResponseFormat struct {
	Type   string // text, json_object, json_schema
	Name   string
	Schema json.RawMessage
	Strict *bool
}

// Reasoning asks for extended thinking.
type Reasoning struct {
	Effort       string // low, medium, high, where the dialect speaks in effort
	BudgetTokens int64  // where it speaks in tokens
}

// CompletionRequest is a legacy text completion.
type CompletionRequest struct {
	Prompt []string
	// MaxTokens is the client's output limit per choice; nil when unset.
	MaxTokens *int64
	// Choices is how many completions are generated (the larger of n and
	// best_of); nil when unset.
	Choices *int64
}

// EmbeddingRequest asks for vectors.
type EmbeddingRequest struct {
	Input          []string
	EncodingFormat string // float or base64
	Dimensions     *int64
}

// StopReason is why generation ended, in neutral words.
type StopReason string

// Stop reasons.
const (
	StopEnd           StopReason = "end"        // natural end or a stop sequence
	StopLength        StopReason = "length"     // token limit
	StopToolCalls     StopReason = "tool_calls" // the model wants tools run
	StopContentFilter StopReason = "content_filter"
	StopRefusal       StopReason = "refusal"
)

// Usage is what a call consumed. PromptTokens includes cached tokens;
// CompletionTokens includes reasoning tokens, as OpenAI counts them.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64 // prompt tokens read from cache
	CacheWriteTokens int64 // prompt tokens written to cache
	// CacheWrite1hTokens are the CacheWriteTokens written to a cache that
	// lives an hour (Anthropic's ephemeral_1h, Bedrock's ttl "1h"), which
	// vendors charge more for than the default five minutes' writes
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// AudioPromptTokens are the uncached prompt tokens that were audio, and
	// AudioCompletionTokens the completion tokens that were (both counted
	// in the totals above too), priced at the model's audio prices.
	AudioPromptTokens     int64
	AudioCompletionTokens int64
	// SearchUnits is what a rerank upstream that bills by search reported.
	SearchUnits int64
	// Estimated is true when the counts came from the local tokenizer
	// because the upstream reported none.
	Estimated bool
}

// Known reports whether any count is set.
func (u Usage) Known() bool {
	return u.PromptTokens != 0 || u.CompletionTokens != 0 || u.SearchUnits != 0
}

// Response is a finished non-streamed answer.
type Response struct {
	ID         string
	Model      string
	Created    int64
	Message    Message // the assistant's message
	StopReason StopReason
	Usage      Usage
	// Raw and Dialect carry the upstream's own body when it spoke the
	// client's dialect, so it is written back untouched.
	Raw     []byte
	Dialect string
	// ContentType of Raw, when the upstream said.
	ContentType string
	// Rerank is a rerank answer's ranking, best first (OpRerank).
	Rerank []RerankResult
	// Embeddings are an embedding answer's vectors, one per input in
	// order, from an upstream of another shape (OpEmbedding).
	Embeddings [][]float32
}

// EventType says which fields of a StreamEvent are set.
type EventType string

// Stream event types, in the order they usually come.
const (
	EventStart         EventType = "start"           // ID, Model
	EventTextDelta     EventType = "text_delta"      // Index, Text
	EventThinkingDelta EventType = "thinking_delta"  // Index, Text, Signature
	EventToolCallStart EventType = "tool_call_start" // Index, ToolCall (ID, Name)
	EventToolCallDelta EventType = "tool_call_delta" // Index, ToolCall.Arguments fragment
	EventFinish        EventType = "finish"          // StopReason
	EventUsage         EventType = "usage"           // Usage
	EventPassthrough   EventType = "passthrough"     // only Raw: a frame with nothing neutral in it
)

// StreamEvent is one step of a streamed answer.
type StreamEvent struct {
	Type       EventType
	ID         string
	Model      string
	Index      int // content block / tool call index
	Text       string
	Signature  string
	ToolCall   *ToolCall
	StopReason StopReason
	Usage      *Usage
	// Raw is the upstream's frame (the whole SSE event, terminator included)
	// when it spoke Dialect; a same-dialect encoder writes it as it is.
	Raw     []byte
	Dialect string
}

// Upstream is what a provider needs to know about the channel it calls.
type Upstream struct {
	Channel string // channel name, for errors
	BaseURL string // before the API version segment
	Key     string
	Model   string // the model name the upstream knows
}

// Dialect is a wire format the gateway speaks to clients.
type Dialect interface {
	Name() string
	// Route reports whether a request is in this dialect (by path, and by
	// headers where paths are shared) and which operation it asks for. The
	// gateway asks dialects in name order, a Fallback dialect last, so the
	// fallback may claim every remaining path under its prefix.
	Route(r *http.Request) (Operation, bool)
	// Credential returns the gateway key where this dialect's clients put
	// it (after "Bearer " in Authorization, x-api-key, ?key=, ...), or "".
	Credential(r *http.Request) string
	// StripCredentials removes every place this dialect reads a key from
	// (other than Authorization, which Caddy's logs redact), so no later
	// handler, proxy or log line sees it. The gateway calls it on every
	// dialect for every request, whichever dialect the request is in.
	StripCredentials(r *http.Request)
	// DecodeRequest validates and decodes a client body. Errors are *Error
	// with a 4xx status.
	DecodeRequest(op Operation, body []byte, r *http.Request) (*Request, error)
	// EncodeResponse renders a finished answer for the client; when
	// resp.Dialect is this dialect it returns resp.Raw.
	EncodeResponse(req *Request, resp *Response) ([]byte, error)
	// NewStreamEncoder renders stream events for one client stream.
	NewStreamEncoder(req *Request) StreamEncoder
	// EncodeError renders an error body in this dialect.
	EncodeError(e *Error) []byte
	// EncodeModels renders a model list.
	EncodeModels(models []ModelInfo) []byte
	// EncodeModel renders a single model object, for GET /v1/models/{id}
	// and GET /v1beta/models/{model}.
	EncodeModel(m ModelInfo) []byte
	// PeekModel reads the model a body names without validating the rest,
	// so the gateway answers an unknown model with 404 whatever else is
	// wrong with the body (clients such as Claude Code tell "no such
	// model" from "bad request" by it); "" when the body names none.
	PeekModel(op Operation, body []byte, r *http.Request) string
}

// StreamEncoder turns neutral events into a client's stream bytes. Encode
// appends to dst and returns it; an event the dialect has nothing to say
// about appends nothing. Finish appends the dialect's closing frames after
// a normal end; Error appends an in-stream error after headers were sent.
type StreamEncoder interface {
	ContentType() string
	Encode(dst []byte, ev *StreamEvent) []byte
	Finish(dst []byte) []byte
	Error(dst []byte, e *Error) []byte
}

// ModelInfo is one entry in a model list.
type ModelInfo struct {
	ID      string
	OwnedBy string // the channel type serving it
	Created int64
}

// BearerToken returns the token after "Bearer " in Authorization, or "".
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// HoistSystem returns the system instructions with those given
// mid-conversation (RoleSystem messages) appended, and the messages without
// them, for a vendor that takes instructions in one place only.
func (c *ChatRequest) HoistSystem() ([]Part, []Message) {
	n := 0
	for _, m := range c.Messages {
		if m.Role == RoleSystem {
			n++
		}
	}
	if n == 0 {
		return c.System, c.Messages
	}
	system := append([]Part(nil), c.System...)
	msgs := make([]Message, 0, len(c.Messages)-n)
	for _, m := range c.Messages {
		if m.Role == RoleSystem {
			system = append(system, m.Parts...)
			continue
		}
		msgs = append(msgs, m)
	}
	return system, msgs
}
