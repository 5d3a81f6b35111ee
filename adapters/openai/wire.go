package openai

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// The OpenAI wire shapes, as in OpenAI's API reference for chat completions,
// completions, embeddings and models. Only what the gateway reads or writes
// is declared; passthrough keeps every other field because it forwards the
// client's own bytes.

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	Tools               []tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                stringList      `json:"stop,omitempty"`
	N                   *int64          `json:"n,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	User                string          `json:"user,omitempty"`
	PromptCacheKey      string          `json:"prompt_cache_key,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    messageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []toolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	Reasoning  string          `json:"reasoning_content,omitempty"`
	Annotation json.RawMessage `json:"annotations,omitempty"`
	// AltReasoning is the reasoning text compatible servers that do not
	// say reasoning_content send (see compat.go)
	AltReasoning looseString `json:"reasoning,omitempty"`
}

// messageContent is either a plain string or an array of parts.
type messageContent struct {
	Text    *string
	Parts   []contentPart
	IsParts bool
}

func (c *messageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		if s, ok := plainString(b); ok {
			c.Text = &s
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.Text = &s
		return nil
	case len(b) > 0 && b[0] == '[':
		c.IsParts = true
		return json.Unmarshal(b, &c.Parts)
	}
	return adapters.BadRequest("invalid type for a message's 'content': expected a string or an array of content parts")
}

// plainString is the JSON string b's text when b holds nothing
// json.Unmarshal would change (no escape, no control character, valid
// UTF-8), without a second validating pass over a prompt encoding/json
// has just read.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	if !plainBytes(in) {
		return "", false
	}
	return string(in), true
}

// plainBytes reports whether a JSON string's content holds nothing
// json.Unmarshal would change: no escape, no control character, valid UTF-8.
func plainBytes(in []byte) bool {
	ascii := true
	for _, c := range in {
		switch {
		case c == '\\' || c == '"' || c < 0x20:
			return false
		case c >= 0x80:
			ascii = false
		}
	}
	return ascii || utf8.Valid(in)
}

func (c messageContent) MarshalJSON() ([]byte, error) {
	switch {
	case c.IsParts:
		return json.Marshal(c.Parts)
	case c.Text != nil:
		return json.Marshal(*c.Text)
	}
	return []byte("null"), nil
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	Refusal  string    `json:"refusal,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type toolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// stringList accepts a string or an array of strings (stop, prompt, input).
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Text         string       `json:"text,omitempty"` // legacy completions
	FinishReason *string      `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
	// Usage is where Moonshot's stream reports usage: in its last
	// chunk's choice (see compat.go)
	Usage *usage `json:"usage,omitempty"`
}

type usage struct {
	PromptTokens            int64               `json:"prompt_tokens"`
	CompletionTokens        int64               `json:"completion_tokens"`
	TotalTokens             int64               `json:"total_tokens"`
	PromptTokensDetails     *promptDetails      `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionsDetails `json:"completion_tokens_details,omitempty"`
	// the cache reads compatible servers report in their own words (see
	// compat.go); never written
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens,omitempty"`
	CachedTokens         int64 `json:"cached_tokens,omitempty"`
}

type promptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type completionsDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *streamOptions  `json:"stream_options,omitempty"`
	MaxTokens     *int64          `json:"max_tokens,omitempty"`
	N             *int64          `json:"n,omitempty"`
	BestOf        *int64          `json:"best_of,omitempty"`
}

type completionResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage *usage `json:"usage,omitempty"`
}

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format,omitempty"`
	Dimensions     *int64          `json:"dimensions,omitempty"`
	User           string          `json:"user,omitempty"`
}

type usageOnly struct {
	Usage *usage `json:"usage"`
}

type errorBody struct {
	Error *errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
