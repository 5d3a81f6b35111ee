package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// envelope is the union of the compatible vendors' error bodies:
//
//	{"error":{"message","type","code","param","metadata"}}  OpenAI's, Zhipu's (a string code),
//	                                                          OpenRouter's (a numeric code, metadata)
//	{"error":"text"}                                          Ollama, LM Studio
//	{"object":"error","message","type","code"}                vLLM, Mistral (message an object on a 422)
//	{"code","message","request_id"}                           DashScope's native paths
type envelope struct {
	Error   json.RawMessage `json:"error"`
	Message json.RawMessage `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

type detail struct {
	Message  string          `json:"message"`
	Type     string          `json:"type"`
	Code     json.RawMessage `json:"code"`
	Param    *string         `json:"param"`
	Metadata *struct {
		Reasons      []string `json:"reasons"`
		ProviderName string   `json:"provider_name"`
	} `json:"metadata"`
}

// known are the error types every dialect maps; a vendor's own (Ark's
// "NotFound", vLLM's "BadRequestError") becomes the status's.
var known = map[adapters.ErrorType]bool{
	adapters.ErrInvalidRequest: true, adapters.ErrAuthentication: true, adapters.ErrPermission: true,
	adapters.ErrNotFound: true, adapters.ErrRequestTooLarge: true, adapters.ErrRateLimit: true,
	adapters.ErrInsufficientQuota: true, adapters.ErrAPI: true, adapters.ErrOverloaded: true,
}

func decodeError(p *preset, status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var env envelope
	if json.Unmarshal(body, &env) != nil {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
		return e
	}
	var d detail
	switch {
	case len(env.Error) > 0 && env.Error[0] == '{':
		_ = json.Unmarshal(env.Error, &d)
	case len(env.Error) > 0 && env.Error[0] == '"':
		_ = json.Unmarshal(env.Error, &d.Message)
	default:
		d.Message = messageText(env.Message)
		d.Type, d.Code = env.Type, env.Code
	}
	if d.Message == "" {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
		return e
	}
	e.Message, e.Code = d.Message, codeText(d.Code)
	if d.Param != nil {
		e.Param = *d.Param
	}
	if t := adapters.ErrorType(d.Type); known[t] {
		e.Type = t
	}
	if d.Metadata != nil {
		// OpenRouter: which provider failed, and why a moderation refused
		if len(d.Metadata.Reasons) > 0 {
			e.Message += " (" + strings.Join(d.Metadata.Reasons, ", ") + ")"
		}
		if d.Metadata.ProviderName != "" {
			e.Message += " [provider: " + d.Metadata.ProviderName + "]"
		}
		if status == http.StatusForbidden && len(d.Metadata.Reasons) > 0 {
			// a moderation's refusal is the request's content, not the key
			e.Status, e.Type, e.Code = http.StatusBadRequest, adapters.ErrInvalidRequest, "moderation"
		}
	}
	if p.codes[e.Code] || p.codes[d.Type] || e.Code == "insufficient_quota" || d.Type == "insufficient_quota" {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// messageText is a message that is a string, or a validation error's
// object (Mistral's 422: {"detail":[{"loc":[...],"msg":...}]}) as text.
func messageText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var v struct {
		Detail []struct {
			Loc []any  `json:"loc"`
			Msg string `json:"msg"`
		} `json:"detail"`
	}
	if json.Unmarshal(raw, &v) == nil && len(v.Detail) > 0 {
		var parts []string
		for _, d := range v.Detail {
			loc := make([]string, len(d.Loc))
			for i, l := range d.Loc {
				loc[i] = fmt.Sprint(l)
			}
			parts = append(parts, strings.Join(loc, ".")+": "+d.Msg)
		}
		return strings.Join(parts, "; ")
	}
	return string(raw)
}

// codeText is a code that is a string or a number.
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return string(n)
		}
	}
	return ""
}
