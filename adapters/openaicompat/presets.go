package openaicompat

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// preset is what one vendor's channel differs in from a channel of type
// openai, each from the vendor's public API reference.
type preset struct {
	name string
	// baseURL is the address a channel that sets no base_url calls.
	baseURL string
	// root is the API's path under the host, before each operation's path:
	// base_url is the host, as DESIGN's contract has it (the address before
	// the version segment), and the preset knows the rest, which for some
	// vendors is no /v1 at all.
	root  string
	paths map[adapters.Operation]string
	wire  openai.WireOptions
	// codes are the vendor's error codes that mean the channel's account,
	// key or model list is at fault (failover, the operator's to fix)
	// though the status alone would blame the request.
	codes map[string]bool
	// streamErrors: the vendor reports a failure mid-stream as a chunk
	// with an error member and finish_reason "error" (OpenRouter).
	streamErrors bool
	// requestID names the headers the vendor names its request id in.
	requestID []string
	// pricedFields are the vendor's body members that cost more than the
	// model's price (PricedFields).
	pricedFields []string
}

var chatOnly = map[adapters.Operation]string{adapters.OpChat: "/chat/completions"}

var chatAndEmbeddings = map[adapters.Operation]string{
	adapters.OpChat:      "/chat/completions",
	adapters.OpEmbedding: "/embeddings",
}

// local servers serve OpenAI's three classic endpoints
var localPaths = map[adapters.Operation]string{
	adapters.OpChat:       "/chat/completions",
	adapters.OpCompletion: "/completions",
	adapters.OpEmbedding:  "/embeddings",
}

func (p *preset) decodeError(status int, body []byte) *adapters.Error {
	return decodeError(p, status, body)
}

// presets, by channel type.
var presets = []*preset{
	{
		// api-docs.deepseek.com: POST /chat/completions at the host (the
		// /v1 prefix is accepted too); max_tokens; thinking asked for with
		// thinking {"type":"enabled"}; in thinking mode a turn's
		// reasoning_content must come back with its tool calls
		name: "deepseek", baseURL: "https://api.deepseek.com", root: "", paths: chatOnly,
		wire: openai.WireOptions{MaxTokens: true, ReasoningHistory: true, Thinking: "thinking"},
	},
	{
		// DashScope's OpenAI-compatible mode: /compatible-mode/v1;
		// thinking asked for with enable_thinking (and thinking_budget); errors
		// in OpenAI's envelope there, {"code","message","request_id"} on
		// the native paths some gateways front it with
		name: "qwen", baseURL: "https://dashscope.aliyuncs.com", root: "/compatible-mode/v1", paths: chatAndEmbeddings,
		wire:  openai.WireOptions{MaxTokens: true, Thinking: "enable_thinking"},
		codes: set("Arrearage", "InvalidApiKey", "AccessDenied.Unpurchased", "model_not_found", "ModelNotFound", "invalid_api_key"),
	},
	{
		// platform.moonshot.ai: /v1; max_tokens; kimi's thinking models
		// keep reasoning_content in the context of a tool-calling turn;
		// cache reads as usage.cached_tokens (read by the openai family)
		name: "moonshot", baseURL: "https://api.moonshot.ai", root: "/v1", paths: chatOnly,
		wire:  openai.WireOptions{MaxTokens: true, ReasoningHistory: true},
		codes: set("exceeded_current_quota_error", "invalid_authentication_error", "permission_denied_error"),
	},
	{
		// open.bigmodel.cn/api/paas/v4 (no /v1); max_tokens; thinking
		// {"type":"enabled"}; errors
		// {"error":{"code":"1211","message":...}} with business codes
		name: "zhipu", baseURL: "https://open.bigmodel.cn", root: "/api/paas/v4", paths: chatAndEmbeddings,
		wire: openai.WireOptions{MaxTokens: true, Thinking: "thinking"},
		// 1110-1121 the account, 1113 in arrears, 1211 no such model,
		// 1220-1222 no permission or the API gone
		codes: set("1000", "1001", "1002", "1003", "1004", "1110", "1111", "1112", "1113", "1120", "1121", "1211", "1220", "1221", "1222"),
	},
	{
		// Volcengine Ark: /api/v3 (no /v1); the model is the endpoint id
		// or model name; thinking {"type":"enabled"}; errors
		// {"error":{"code","message","param","type"}}
		name: "doubao", baseURL: "https://ark.cn-beijing.volces.com", root: "/api/v3", paths: chatAndEmbeddings,
		wire:      openai.WireOptions{MaxTokens: true, Thinking: "thinking"},
		codes:     set("AccountOverdueError", "InvalidEndpointOrModel.NotFound", "ModelNotOpen", "AuthenticationError", "AccessDenied"),
		requestID: []string{"X-Client-Request-Id"},
	},
	{
		// docs.mistral.ai: /v1; max_tokens; refuses members it does not
		// know (422 extra_forbidden), and sends a stream's usage unasked;
		// tool call ids of nine letters and digits only
		name: "mistral", baseURL: "https://api.mistral.ai", root: "/v1", paths: chatAndEmbeddings,
		wire: openai.WireOptions{MaxTokens: true, NoStreamOptions: true, NoReasoningEffort: true, ShortToolCallIDs: true},
	},
	{
		// openrouter.ai/api/v1; max_tokens; errors carry a numeric code and
		// metadata (the moderation's reasons, the provider's name); a
		// failure mid-stream is a chunk with an error and finish_reason
		// "error"
		name: "openrouter", baseURL: "https://openrouter.ai", root: "/api/v1", paths: chatAndEmbeddings,
		wire: openai.WireOptions{MaxTokens: true}, streamErrors: true,
		pricedFields: []string{"plugins", "models"},
	},
	{
		// Ollama's OpenAI compatibility: /v1; max_tokens; errors
		// {"error":"model \"x\" not found, try pulling it first"}
		name: "ollama", baseURL: "http://localhost:11434", root: "/v1", paths: localPaths,
		wire: openai.WireOptions{MaxTokens: true},
	},
	{
		// vLLM's OpenAI-compatible server: /v1; older servers know only
		// max_tokens; errors {"object":"error","message",...} or OpenAI's
		name: "vllm", baseURL: "http://localhost:8000", root: "/v1", paths: localPaths,
		wire: openai.WireOptions{MaxTokens: true},
	},
	{
		// LM Studio's server: /v1; max_tokens
		name: "lmstudio", baseURL: "http://localhost:1234", root: "/v1", paths: localPaths,
		wire: openai.WireOptions{MaxTokens: true},
	},
}

func set(codes ...string) map[string]bool {
	m := make(map[string]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}
