package tracing

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// The OpenTelemetry GenAI semantic conventions' attributes the gateway
// sets (semantic conventions 1.37 and later: gen_ai.provider.name
// replaced gen_ai.system), then the gateway's own.
const (
	OperationName   = attribute.Key("gen_ai.operation.name")
	ProviderName    = attribute.Key("gen_ai.provider.name")
	RequestModel    = attribute.Key("gen_ai.request.model")
	ResponseModel   = attribute.Key("gen_ai.response.model")
	InputTokens     = attribute.Key("gen_ai.usage.input_tokens")
	OutputTokens    = attribute.Key("gen_ai.usage.output_tokens")
	CachedTokens    = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	FinishReasons   = attribute.Key("gen_ai.response.finish_reasons")
	InputMessages   = attribute.Key("gen_ai.input.messages")
	OutputMessages  = attribute.Key("gen_ai.output.messages")
	SystemMessages  = attribute.Key("gen_ai.system_instructions")
	ConversationID  = attribute.Key("gen_ai.conversation.id")
	ReasoningTokens = attribute.Key("gen_ai.usage.reasoning.output_tokens") // not in the conventions yet; named as the ones that carry it do

	Stream        = attribute.Key("gateway.stream")
	Channel       = attribute.Key("gateway.channel")
	Cost          = attribute.Key("gateway.cost_units") // 1,000,000 units = 1 USD
	UserID        = attribute.Key("gateway.user_id")
	TokenID       = attribute.Key("gateway.key_id")
	RequestID     = attribute.Key("gateway.request_id")
	AttemptNumber = attribute.Key("gateway.attempt")
	FailureFault  = attribute.Key("gateway.failure.fault") // channel or request
	FailoverNext  = attribute.Key("gateway.failover")      // the next channel is tried after this one
	TaskID        = attribute.Key("gateway.task_id")
	TaskStatus    = attribute.Key("gateway.task.status")
	ContentCut    = attribute.Key("gateway.content_truncated") // trace_content cut a message attribute
)

// EventFirstToken is the event at a stream's first token.
const EventFirstToken = "gen_ai.first_token"

// EventResponse is the event of each response of a Realtime session.
const EventResponse = "gen_ai.response"

// OperationOf is the GenAI operation name of a gateway operation; wire is
// the client's dialect ("gemini" asks generate_content).
func OperationOf(op adapters.Operation, wire string) string {
	switch op {
	case adapters.OpChat:
		if wire == "gemini" {
			return "generate_content"
		}
		return "chat"
	case adapters.OpResponses:
		return "chat"
	case adapters.OpCompletion:
		return "text_completion"
	case adapters.OpEmbedding:
		return "embeddings"
	}
	// the conventions name no operation for these: the gateway's word
	return string(op)
}

// ProviderOf is the conventions' provider name of a channel type; a type
// they do not name is given as it is.
func ProviderOf(channelType string) string {
	switch channelType {
	case "gemini":
		return "gcp.gemini"
	case "vertex":
		return "gcp.vertex_ai"
	case "mistral":
		return "mistral_ai"
	case "xai":
		return "x_ai"
	case "bedrock":
		return "aws.bedrock"
	}
	return channelType
}

// FinishReasonOf is a neutral stop reason as the conventions' examples
// spell finish reasons (OpenAI's words).
func FinishReasonOf(reason string) string {
	switch adapters.StopReason(reason) {
	case adapters.StopEnd:
		return "stop"
	case adapters.StopLength:
		return "length"
	}
	return reason
}
