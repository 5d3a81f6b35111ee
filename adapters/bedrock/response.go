package bedrock

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// DecodeResponse implements adapters.ChatProvider: a Converse answer in
// neutral form.
func (Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if req.Op == adapters.OpEmbedding {
		return decodeEmbeddings(req, body)
	}
	var w converseResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{ID: answerID(body), Usage: usageFromWire(w.Usage), StopReason: stopReason(w.StopReason)}
	resp.Message.Role = adapters.RoleAssistant
	if m := w.Output.Message; m != nil {
		for _, b := range m.Content {
			switch {
			case b.Text != nil:
				if *b.Text != "" {
					resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartText, Text: *b.Text})
				}
			case b.ToolUse != nil:
				args := string(b.ToolUse.Input)
				if args == "" || args == "null" {
					args = "{}"
				}
				resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartToolCall,
					ToolCall: &adapters.ToolCall{ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name, Arguments: args}})
			case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
				rt := b.ReasoningContent.ReasoningText
				p := adapters.Part{Type: adapters.PartThinking, Text: rt.Text}
				if rt.Signature != "" {
					p.Signature = adapters.TagSignature(Name, rt.Signature)
				}
				resp.Message.Parts = append(resp.Message.Parts, p)
			case b.ReasoningContent != nil && len(b.ReasoningContent.RedactedContent) > 0:
				resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartThinking,
					Redacted: base64.StdEncoding.EncodeToString(b.ReasoningContent.RedactedContent)})
			}
		}
	}
	return resp, nil
}

// answerID names an answer Bedrock gave no id: from its bytes, which
// differ from answer to answer (stream frames carry random padding), so a
// client that keys on ids sees distinct ones and a fixture the same one.
func answerID(b []byte) string {
	sum := sha256.Sum256(b)
	return "bedrock-" + hex.EncodeToString(sum[:12])
}

// usageFromWire reads Converse's TokenUsage: inputTokens are the prompt
// tokens neither read from nor written to the cache, so the prompt is all
// three (as neutral usage counts it).
func usageFromWire(u *usage) adapters.Usage {
	if u == nil {
		return adapters.Usage{}
	}
	var write1h int64
	for _, d := range u.CacheDetails {
		if d.TTL == "1h" {
			write1h += max(d.InputTokens, 0)
		}
	}
	return adapters.Usage{
		PromptTokens:       u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
		CompletionTokens:   u.OutputTokens,
		CachedTokens:       u.CacheReadInputTokens,
		CacheWriteTokens:   u.CacheWriteInputTokens,
		CacheWrite1hTokens: min(write1h, u.CacheWriteInputTokens),
	}
}

// stopReason maps Converse's stopReason.
func stopReason(s string) adapters.StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return adapters.StopLength
	case "tool_use":
		return adapters.StopToolCalls
	case "guardrail_intervened", "content_filtered":
		return adapters.StopContentFilter
	case "":
		return ""
	}
	return adapters.StopEnd // end_turn, stop_sequence
}

// errorStatus is the HTTP status Bedrock Runtime gives each of its
// exceptions (their names as in x-amzn-errortype, and camel-cased as an
// event stream's :exception-type), for errors that arrive in a stream.
var errorStatus = map[string]int{
	"ValidationException":         http.StatusBadRequest,
	"AccessDeniedException":       http.StatusForbidden,
	"UnrecognizedClientException": http.StatusForbidden,
	"InvalidSignatureException":   http.StatusForbidden,
	"ResourceNotFoundException":   http.StatusNotFound,
	"ModelTimeoutException":       http.StatusRequestTimeout,
	"ModelErrorException":         http.StatusFailedDependency,
	"ModelNotReadyException":      http.StatusTooManyRequests,
	"ThrottlingException":         http.StatusTooManyRequests,
	"ServiceUnavailableException": http.StatusServiceUnavailable,
	"InternalServerException":     http.StatusInternalServerError,
	"ModelStreamErrorException":   http.StatusFailedDependency,
}

// DecodeError implements adapters.Provider. Bedrock writes
// {"message": "..."} and names the exception in a header; its status
// says enough to classify it: 400 ValidationException, 403
// AccessDeniedException (the channel's account, not the request: another
// channel may serve it), 429 ThrottlingException and
// ModelNotReadyException (retried elsewhere), 503 ServiceUnavailable.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) == nil && w.Message != "" {
		e.Message = w.Message
	} else {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	}
	switch {
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		e.Fault = adapters.FaultChannel
	case status == http.StatusFailedDependency:
		// ModelErrorException: the model failed on the request; another
		// channel may not
		e.Status, e.Type = http.StatusBadGateway, adapters.ErrAPI
	}
	return e
}

// streamError is an exception frame of a ConverseStream answer.
func streamError(exception string, data []byte) *adapters.Error {
	name := strings.ToUpper(exception[:1]) + exception[1:]
	status, ok := errorStatus[name]
	if !ok {
		status = http.StatusBadGateway
	}
	if status == http.StatusFailedDependency {
		status = http.StatusBadGateway
	}
	var w errorBody
	msg := "the upstream stream reported " + name
	if json.Unmarshal(data, &w) == nil && w.Message != "" {
		msg = w.Message
	}
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status), Code: name, Message: msg}
	if status == http.StatusForbidden {
		e.Fault = adapters.FaultChannel
	}
	return e
}
