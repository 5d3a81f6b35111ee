package openai

import "encoding/json"

// The Responses API's wire shapes (POST /v1/responses), as in OpenAI's API
// reference. Only what the gateway reads or writes is declared: an OpenAI
// channel gets the client's own bytes, so every other field still reaches it.

type responsesRequest struct {
	Model              string              `json:"model"`
	Input              json.RawMessage     `json:"input"`
	Instructions       json.RawMessage     `json:"instructions"`
	Stream             bool                `json:"stream"`
	Tools              []responsesTool     `json:"tools"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	ParallelToolCalls  *bool               `json:"parallel_tool_calls"`
	MaxOutputTokens    *int64              `json:"max_output_tokens"`
	Temperature        *float64            `json:"temperature"`
	TopP               *float64            `json:"top_p"`
	Reasoning          *responsesReasoning `json:"reasoning"`
	Text               *responsesText      `json:"text"`
	Store              *bool               `json:"store"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Include            []string            `json:"include"`
	User               string              `json:"user"`
	SafetyIdentifier   string              `json:"safety_identifier"`
	PromptCacheKey     string              `json:"prompt_cache_key"`
	ServiceTier        *string             `json:"service_tier"`
	Truncation         *string             `json:"truncation"`
	Background         *bool               `json:"background"`
	TopLogprobs        *int64              `json:"top_logprobs"`
	MaxToolCalls       *int64              `json:"max_tool_calls"`
}

type responsesReasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"` // the older name of summary
}

type responsesText struct {
	Format    *responsesFormat `json:"format"`
	Verbosity *string          `json:"verbosity"`
}

type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responsesItem is one input item: a message (with or without its type),
// a function call, a function call's output, or a reasoning item.
type responsesItem struct {
	Type             string                 `json:"type"`
	ID               string                 `json:"id"`
	Role             string                 `json:"role"`
	Content          json.RawMessage        `json:"content"`
	CallID           string                 `json:"call_id"`
	Name             string                 `json:"name"`
	Arguments        string                 `json:"arguments"`
	Output           json.RawMessage        `json:"output"`
	Summary          []responsesSummaryText `json:"summary"`
	EncryptedContent *string                `json:"encrypted_content"`
}

type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

type responsesSummaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// responsesObject is a response as the API returns it and as the stream's
// response.* events carry it.
type responsesObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *responsesError   `json:"error"`
	IncompleteDetails  *incompleteReason `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responsesUsage   `json:"usage"`
	User               *string           `json:"user"`
	Metadata           json.RawMessage   `json:"metadata"`
}

type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteReason struct {
	Reason string `json:"reason"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// output items

type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type messageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type reasoningItem struct {
	ID               string                 `json:"id"`
	Type             string                 `json:"type"`
	Summary          []responsesSummaryText `json:"summary"`
	EncryptedContent *string                `json:"encrypted_content,omitempty"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// responsesUsageOnly reads the usage of a response body, or of a stream's
// response.completed (and .incomplete, .failed) event.
type responsesUsageOnly struct {
	Usage    *responsesUsage `json:"usage"`
	Response *struct {
		Usage *responsesUsage `json:"usage"`
	} `json:"response"`
}
