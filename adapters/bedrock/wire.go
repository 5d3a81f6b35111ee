package bedrock

import "encoding/json"

// Converse's wire types, from the Bedrock Runtime API reference
// (API_runtime_Converse, API_runtime_ConverseStream and the data types
// they name: Message, ContentBlock, ToolConfiguration, TokenUsage).

type converseRequest struct {
	Messages                     []message        `json:"messages"`
	System                       []systemBlock    `json:"system,omitempty"`
	InferenceConfig              *inferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig                   *toolConfig      `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields json.RawMessage  `json:"additionalModelRequestFields,omitempty"`
}

type message struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

type systemBlock struct {
	Text string `json:"text"`
}

type inferenceConfig struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// contentBlock is a union: exactly one member is set.
type contentBlock struct {
	Text             *string           `json:"text,omitempty"`
	Image            *imageBlock       `json:"image,omitempty"`
	ToolUse          *toolUse          `json:"toolUse,omitempty"`
	ToolResult       *toolResult       `json:"toolResult,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
	// members this gateway does not translate, kept to refuse them by name
	Document     json.RawMessage `json:"document,omitempty"`
	Video        json.RawMessage `json:"video,omitempty"`
	GuardContent json.RawMessage `json:"guardContent,omitempty"`
	CachePoint   json.RawMessage `json:"cachePoint,omitempty"`
}

type imageBlock struct {
	Format string      `json:"format"` // png, jpeg, gif, webp
	Source imageSource `json:"source"`
}

type imageSource struct {
	Bytes []byte `json:"bytes"` // base64 on the wire
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []toolResultContent `json:"content"`
	Status    string              `json:"status,omitempty"` // success, error
}

type toolResultContent struct {
	Text  *string         `json:"text,omitempty"`
	Image *imageBlock     `json:"image,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
}

type reasoningContent struct {
	ReasoningText   *reasoningText `json:"reasoningText,omitempty"`
	RedactedContent []byte         `json:"redactedContent,omitempty"`
}

type reasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

type toolConfig struct {
	Tools      []toolSpecBlock `json:"tools"`
	ToolChoice *toolChoice     `json:"toolChoice,omitempty"`
}

type toolSpecBlock struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	InputSchema inputSchema `json:"inputSchema"`
}

type inputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// toolChoice is a union: auto, any, or tool.
type toolChoice struct {
	Auto *struct{}     `json:"auto,omitempty"`
	Any  *struct{}     `json:"any,omitempty"`
	Tool *specificTool `json:"tool,omitempty"`
}

type specificTool struct {
	Name string `json:"name"`
}

type converseResponse struct {
	Output struct {
		Message *message `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      *usage `json:"usage"`
}

type usage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	// CacheDetails split the cache writes by TTL ("5m", "1h"), which
	// Anthropic's models on Bedrock price apart
	CacheDetails []cacheDetail `json:"cacheDetails,omitempty"`
}

// cacheDetail is Converse's CacheDetail: the tokens written to a cache
// of one TTL.
type cacheDetail struct {
	InputTokens int64  `json:"inputTokens"`
	TTL         string `json:"ttl"`
}

// Stream events' payloads (ConverseStreamOutput's members).
type streamPayload struct {
	Role              string          `json:"role"`              // messageStart
	ContentBlockIndex int             `json:"contentBlockIndex"` // contentBlock*
	Start             *blockStart     `json:"start"`             // contentBlockStart
	Delta             *blockDelta     `json:"delta"`             // contentBlockDelta
	StopReason        string          `json:"stopReason"`        // messageStop
	Usage             *usage          `json:"usage"`             // metadata
	Message           string          `json:"message"`           // exceptions
	Metrics           json.RawMessage `json:"metrics"`
}

type blockStart struct {
	ToolUse *struct {
		ToolUseID string `json:"toolUseId"`
		Name      string `json:"name"`
	} `json:"toolUse"`
}

type blockDelta struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		Input string `json:"input"`
	} `json:"toolUse"`
	ReasoningContent *struct {
		Text            string `json:"text"`
		Signature       string `json:"signature"`
		RedactedContent []byte `json:"redactedContent"`
	} `json:"reasoningContent"`
}

// errorBody is Bedrock's error body; the exception's name travels in the
// x-amzn-errortype header, and its status says enough to classify it.
type errorBody struct {
	Message string `json:"message"`
}
