package anthropic

import (
	"bytes"
	"encoding/json"
)

// The Anthropic wire shapes, as in Anthropic's API reference for the
// Messages API, its streaming events, token counting and models. Only what
// the gateway reads or writes is declared; passthrough keeps every other
// field because it forwards the client's own bytes.

type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int64          `json:"max_tokens,omitempty"`
	Messages      []message       `json:"messages"`
	System        *content        `json:"system,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int64          `json:"top_k,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	Thinking      *thinkingConfig `json:"thinking,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
	MCPServers    []struct {
		Name string `json:"name"`
	} `json:"mcp_servers,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

// content is a string or an array of blocks; a string decodes as one text
// block and is remembered as such.
type content struct {
	Blocks   []block
	IsString bool
}

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.IsString = true
		c.Blocks = []block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(b, &c.Blocks)
}

func (c content) MarshalJSON() ([]byte, error) {
	if c.IsString && len(c.Blocks) == 1 && c.Blocks[0].Type == "text" {
		return json.Marshal(c.Blocks[0].Text)
	}
	if c.Blocks == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.Blocks)
}

// block is any content block; Type says which fields are set.
type block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// image, document
	Source *source `json:"source,omitempty"`
	// tool_use, server_tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string   `json:"tool_use_id,omitempty"`
	Content   *content `json:"content,omitempty"`
	IsError   bool     `json:"is_error,omitempty"`
	// thinking
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// redacted_thinking
	Data string `json:"data,omitempty"`
	// a cache breakpoint the provider sets (auto_cache)
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type source struct {
	Type      string `json:"type"` // base64, url, file, text, content
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileID    string `json:"file_id,omitempty"`
}

type tool struct {
	Type        string          `json:"type,omitempty"` // "" or "custom" for client tools; a dated type for server tools
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}

type thinkingConfig struct {
	Type         string `json:"type"` // enabled, disabled, adaptive
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id,omitempty"`
}

type outputConfig struct {
	Effort string        `json:"effort,omitempty"`
	Format *outputFormat `json:"format,omitempty"`
}

type outputFormat struct {
	Type   string          `json:"type"` // json_schema
	Schema json.RawMessage `json:"schema,omitempty"`
}

type messageResponse struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        *usage  `json:"usage,omitempty"`
}

// usage is Anthropic's usage object. Input tokens exclude the cached ones,
// which are counted apart. Pointers tell a count that is absent (message_delta
// leaves out what did not change) from a zero.
type usage struct {
	InputTokens              *int64          `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int64          `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64          `json:"cache_read_input_tokens,omitempty"`
	CacheCreation            *cacheCreation  `json:"cache_creation,omitempty"`
	OutputTokens             int64           `json:"output_tokens"`
	OutputTokensDetails      *outputDetails  `json:"output_tokens_details,omitempty"`
	ServerToolUse            json.RawMessage `json:"server_tool_use,omitempty"`
}

// cacheCreation splits cache_creation_input_tokens by the cache's
// lifetime (cache_control's ttl), which Anthropic prices apart.
type cacheCreation struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

type outputDetails struct {
	ThinkingTokens int64 `json:"thinking_tokens"`
}

type streamEvent struct {
	Type         string           `json:"type"`
	Message      *messageResponse `json:"message,omitempty"`
	Index        int              `json:"index"`
	ContentBlock *block           `json:"content_block,omitempty"`
	Delta        *streamDelta     `json:"delta,omitempty"`
	Usage        *usage           `json:"usage,omitempty"`
	Error        *errorDetail     `json:"error,omitempty"`
}

type streamDelta struct {
	Type        string  `json:"type"`
	Text        string  `json:"text"`
	PartialJSON string  `json:"partial_json"`
	Thinking    string  `json:"thinking"`
	Signature   string  `json:"signature"`
	StopReason  *string `json:"stop_reason"`
}

type countTokensResponse struct {
	InputTokens int64 `json:"input_tokens"`
}

type errorBody struct {
	Type  string       `json:"type"`
	Error *errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type modelList struct {
	Data    []modelObject `json:"data"`
	HasMore bool          `json:"has_more"`
	FirstID *string       `json:"first_id"`
	LastID  *string       `json:"last_id"`
}

type modelObject struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}
