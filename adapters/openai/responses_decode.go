package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// responsesFields are the request members the gateway translates, or
// accepts because they only shape caching, telemetry or the stream's
// framing. Any other member is honoured only by an OpenAI channel.
var responsesFields = map[string]bool{
	"model": true, "input": true, "instructions": true, "stream": true, "tools": true,
	"tool_choice": true, "parallel_tool_calls": true, "max_output_tokens": true,
	"temperature": true, "top_p": true, "reasoning": true, "text": true, "store": true,
	"previous_response_id": true, "include": true, "user": true, "safety_identifier": true,
	"service_tier": true, "truncation": true, "background": true, "top_logprobs": true,
	"max_tool_calls": true, "conversation": true, "prompt": true,
	// caching and telemetry only
	"prompt_cache_key": true, "prompt_cache_retention": true, "metadata": true,
	"client_metadata": true, "stream_options": true,
}

// noState is the refusal of anything that needs the gateway to remember a
// conversation between requests.
func noState(field string) *adapters.Error {
	e := adapters.BadRequest("'%s' cannot be used with this model: the gateway keeps no conversation state, so it can only send a channel of another family the whole conversation. Send every turn in 'input' (with \"store\": false) instead", field)
	e.Param = field
	return e
}

// untranslatable is the refusal of a field only an OpenAI channel honours.
func untranslatable(field, why string) *adapters.Error {
	e := adapters.BadRequest("'%s' cannot be used with this model: %s; remove it, or use a model served by an OpenAI channel", field, why)
	e.Param = field
	return e
}

// decodeResponses reads a Responses API request. What it cannot express
// in neutral form goes to req.Untranslatable rather than failing here: an
// OpenAI channel receives the client's bytes and honours it.
func decodeResponses(req *adapters.Request, body []byte) error {
	var top map[string]json.RawMessage
	if err := adapters.DecodeJSON(body, &top); err != nil {
		return err
	}
	var w responsesRequest
	if err := adapters.DecodeJSON(body, &w); err != nil {
		return err
	}
	req.Model, req.Stream = w.Model, w.Stream
	if w.Model == "" {
		return adapters.BadRequest("'model' is required: name the model to use, for example \"gpt-4o-mini\" (GET /v1/models lists the models your key may use)")
	}
	refuse := func(e *adapters.Error) { req.Untranslatable = append(req.Untranslatable, e) }
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !responsesFields[k] && !isNull(top[k]) {
			refuse(untranslatable(k, "the gateway cannot translate it for a channel of another family"))
		}
	}
	c := &adapters.ChatRequest{
		ParallelToolCalls: w.ParallelToolCalls,
		MaxTokens:         w.MaxOutputTokens,
		Temperature:       w.Temperature,
		TopP:              w.TopP,
		User:              w.User,
		CacheKey:          w.PromptCacheKey,
	}
	if c.User == "" {
		c.User = w.SafetyIdentifier
	}
	if w.PreviousResponseID != nil && *w.PreviousResponseID != "" {
		refuse(noState("previous_response_id"))
	}
	if w.Store != nil && *w.Store {
		refuse(noState("store"))
	}
	if !isNull(top["conversation"]) && top["conversation"] != nil {
		refuse(noState("conversation"))
	}
	if !isNull(top["prompt"]) && top["prompt"] != nil {
		refuse(untranslatable("prompt", "stored prompt templates live in OpenAI's platform"))
	}
	if w.Background != nil && *w.Background {
		refuse(untranslatable("background", "background responses are kept by OpenAI for polling"))
	}
	if w.TopLogprobs != nil && *w.TopLogprobs > 0 {
		refuse(untranslatable("top_logprobs", "log probabilities do not translate"))
	}
	if w.MaxToolCalls != nil {
		refuse(untranslatable("max_tool_calls", "it limits OpenAI's hosted tools"))
	}
	if w.ServiceTier != nil && *w.ServiceTier != "auto" && *w.ServiceTier != "default" {
		refuse(untranslatable("service_tier", "service tiers are OpenAI's"))
	}
	if w.Truncation != nil && *w.Truncation != "disabled" {
		refuse(untranslatable("truncation", "the gateway does not shorten conversations"))
	}
	for _, inc := range w.Include {
		if inc != "reasoning.encrypted_content" {
			refuse(untranslatable("include", "only \"reasoning.encrypted_content\" can be included from a channel of another family, not "+quote(inc)))
			break
		}
	}
	if r := w.Reasoning; r != nil && r.Effort != nil {
		switch *r.Effort {
		case "", "none":
		case "minimal", "low", "medium", "high", "xhigh":
			c.Reasoning = &adapters.Reasoning{Effort: *r.Effort}
		default:
			return badParam("reasoning.effort", "'reasoning.effort' must be one of none, minimal, low, medium, high, xhigh; got %q", *r.Effort)
		}
	}
	if t := w.Text; t != nil {
		if t.Verbosity != nil && *t.Verbosity != "medium" {
			refuse(untranslatable("text.verbosity", "only OpenAI's models take a verbosity"))
		}
		if f := t.Format; f != nil {
			switch f.Type {
			case "text":
			case "json_object":
				c.ResponseFormat = &adapters.ResponseFormat{Type: "json_object"}
			case "json_schema":
				if len(f.Schema) == 0 {
					return badParam("text.format.schema", "'text.format.schema' is required when text.format.type is \"json_schema\"")
				}
				c.ResponseFormat = &adapters.ResponseFormat{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict}
			default:
				return badParam("text.format.type", "'text.format.type' must be text, json_object or json_schema; got %q", f.Type)
			}
		}
	}
	for i, t := range w.Tools {
		switch t.Type {
		case "function":
			if t.Name == "" {
				return badParam("tools", "'tools[%d].name' is required for a function tool", i)
			}
			c.Tools = append(c.Tools, adapters.Tool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
		case "":
			return badParam("tools", "'tools[%d].type' is required", i)
		default:
			refuse(untranslatable("tools", "tools["+itoa(i)+"] is a "+quote(t.Type)+" tool, which OpenAI runs itself; only function tools translate"))
		}
	}
	if len(w.ToolChoice) > 0 && !isNull(w.ToolChoice) {
		tc, err := responsesToolChoice(w.ToolChoice)
		if err != nil {
			return err
		}
		if tc == nil {
			refuse(untranslatable("tool_choice", "it names a kind of tool only OpenAI runs"))
		} else {
			c.ToolChoice = tc
		}
	}
	if len(w.Instructions) > 0 && !isNull(w.Instructions) {
		var s string
		if json.Unmarshal(w.Instructions, &s) == nil {
			if s != "" {
				c.System = append(c.System, adapters.Part{Type: adapters.PartText, Text: s})
			}
		} else {
			var items []responsesItem
			if err := json.Unmarshal(w.Instructions, &items); err != nil {
				return badParam("instructions", "'instructions' must be a string or an array of input messages")
			}
			for i, it := range items {
				parts, err := responsesContent(it.Content, "instructions["+itoa(i)+"].content")
				if err != nil {
					return err
				}
				c.System = append(c.System, textOnly(parts)...)
			}
		}
	}
	if err := responsesInput(c, w.Input, refuse); err != nil {
		return err
	}
	fillToolResultNames(c.Messages)
	req.Chat = c
	return nil
}

func badParam(param, format string, args ...any) *adapters.Error {
	e := adapters.BadRequest(format, args...)
	e.Param = param
	return e
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// responsesToolChoice reads tool_choice; nil with no error for a hosted
// tool kind (allowed_tools, web_search_preview, mcp, custom, ...).
func responsesToolChoice(raw json.RawMessage) (*adapters.ToolChoice, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return &adapters.ToolChoice{Mode: s}, nil
		}
		return nil, badParam("tool_choice", "'tool_choice' must be auto, none, required or an object naming a function; got %q", s)
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type == "" {
		return nil, badParam("tool_choice", "'tool_choice' must be auto, none, required or an object such as {\"type\":\"function\",\"name\":...}")
	}
	if obj.Type != "function" {
		return nil, nil
	}
	if obj.Name == "" {
		return nil, badParam("tool_choice", "'tool_choice.name' is required")
	}
	return &adapters.ToolChoice{Mode: adapters.ToolChoiceTool, Name: obj.Name}, nil
}

// responsesInput reads input (a string, or a list of items) into the
// conversation: leading system and developer messages into System, later
// ones as mid-conversation system turns; reasoning, assistant text and
// function calls of one turn into one assistant message; function call
// outputs into one tool message per run.
func responsesInput(c *adapters.ChatRequest, raw json.RawMessage, refuse func(*adapters.Error)) error {
	if isNull(raw) {
		return badParam("input", "'input' is required: a string or an array of input items")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: s}}})
		return nil
	}
	var items []responsesItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return badParam("input", "'input' must be a string or an array of input items: %v", adapters.JSONError(err).Message)
	}
	if len(items) == 0 {
		return badParam("input", "'input' must not be empty")
	}
	// appendTo adds parts to the last message when it has the role,
	// else starts a message
	appendTo := func(role string, parts ...adapters.Part) {
		if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == role {
			c.Messages[n-1].Parts = append(c.Messages[n-1].Parts, parts...)
			return
		}
		c.Messages = append(c.Messages, adapters.Message{Role: role, Parts: parts})
	}
	for i, it := range items {
		at := "input[" + itoa(i) + "]"
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			parts, err := responsesContent(it.Content, at+".content")
			if err != nil {
				return err
			}
			switch it.Role {
			case "system", "developer":
				if len(c.Messages) == 0 {
					c.System = append(c.System, textOnly(parts)...)
				} else {
					c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleSystem, Parts: textOnly(parts)})
				}
			case "user":
				c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleUser, Parts: parts})
			case "assistant":
				appendTo(adapters.RoleAssistant, parts...)
			default:
				return badParam("input", "'%s.role' must be user, assistant, system or developer; got %q", at, it.Role)
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return badParam("input", "'%s' needs call_id and name", at)
			}
			call := adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}}
			// calls and outputs interleaved (call, output, call, output,
			// as OpenAI's guide builds the input) are one turn's parallel
			// calls: the call joins its turn, the output the turn's results
			if n := len(c.Messages); n >= 2 && i > 0 && items[i-1].Type == "function_call_output" &&
				c.Messages[n-1].Role == adapters.RoleTool && c.Messages[n-2].Role == adapters.RoleAssistant {
				c.Messages[n-2].Parts = append(c.Messages[n-2].Parts, call)
				continue
			}
			appendTo(adapters.RoleAssistant, call)
		case "function_call_output":
			if it.CallID == "" {
				return badParam("input", "'%s.call_id' is required", at)
			}
			content, err := responsesOutput(it.Output, at+".output")
			if err != nil {
				return err
			}
			appendTo(adapters.RoleTool, adapters.Part{Type: adapters.PartToolResult, ToolResult: &adapters.ToolResult{CallID: it.CallID, Content: content}})
		case "reasoning":
			appendTo(adapters.RoleAssistant, reasoningPart(it))
		case "item_reference":
			refuse(noState(at + " (item_reference)"))
		case "":
			return badParam("input", "'%s.type' is required", at)
		default:
			// web_search_call, computer_call_output, custom_tool_call...:
			// OpenAI's own items
			refuse(untranslatable("input", at+" is a "+quote(typ)+" item, which only OpenAI's hosted tools produce"))
		}
	}
	return nil
}

func textOnly(parts []adapters.Part) []adapters.Part {
	out := parts[:0:0]
	for _, p := range parts {
		if p.Type == adapters.PartText {
			out = append(out, p)
		}
	}
	return out
}

// responsesContent reads a message's content: a string or a list of parts.
func responsesContent(raw json.RawMessage, at string) ([]adapters.Part, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []adapters.Part{{Type: adapters.PartText, Text: s}}, nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, badParam("input", "'%s' must be a string or an array of content parts", at)
	}
	out := make([]adapters.Part, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "summary_text":
			out = append(out, adapters.Part{Type: adapters.PartText, Text: p.Text})
		case "refusal":
			out = append(out, adapters.Part{Type: adapters.PartText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				// a file_id needs OpenAI's file store: kept as a vendor part
				out = append(out, adapters.Part{Type: "input_image_file"})
				continue
			}
			img, err := ParseImageURL(p.ImageURL)
			if err != nil {
				return nil, badParam("input", "'%s[%d].image_url': %v", at, j, err)
			}
			img.Detail = p.Detail
			out = append(out, adapters.Part{Type: adapters.PartImage, Image: img})
		case "":
			return nil, badParam("input", "'%s[%d].type' is required", at, j)
		default:
			// input_file, input_audio: a vendor part, refused by translation
			out = append(out, adapters.Part{Type: adapters.PartType(p.Type)})
		}
	}
	return out, nil
}

// responsesOutput reads a function call's output: a string or parts.
func responsesOutput(raw json.RawMessage, at string) ([]adapters.Part, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []adapters.Part{{Type: adapters.PartText, Text: s}}, nil
	}
	return responsesContent(raw, at)
}

// gatewayReasoning prefixes the encrypted_content the gateway hands out for
// reasoning made by a channel of another family: the thinking text and its
// vendor-tagged signature, so the next turn can give the vendor its own
// thinking back. It is opaque to clients, like OpenAI's.
const gatewayReasoning = "gateway:"

type reasoningBlob struct {
	Text      string `json:"t,omitempty"`
	Signature string `json:"s,omitempty"`
}

func encodeReasoningBlob(text, sig string) string {
	b, _ := json.Marshal(reasoningBlob{Text: text, Signature: sig})
	return gatewayReasoning + base64.RawURLEncoding.EncodeToString(b)
}

// reasoningPart reads a reasoning input item. OpenAI's own encrypted
// content is tagged as OpenAI's, so no other vendor is sent it.
func reasoningPart(it responsesItem) adapters.Part {
	p := adapters.Part{Type: adapters.PartThinking}
	var text strings.Builder
	for _, s := range it.Summary {
		text.WriteString(s.Text)
	}
	p.Text = text.String()
	if it.EncryptedContent == nil || *it.EncryptedContent == "" {
		return p
	}
	enc := *it.EncryptedContent
	if blob, ok := strings.CutPrefix(enc, gatewayReasoning); ok {
		var r reasoningBlob
		if b, err := base64.RawURLEncoding.DecodeString(blob); err == nil && json.Unmarshal(b, &r) == nil {
			p.Text, p.Signature = r.Text, r.Signature
			return p
		}
	}
	p.Signature = adapters.TagSignature(Name, enc)
	return p
}

// PeekModel implements adapters.Dialect.
func (Adapter) PeekModel(op adapters.Operation, body []byte, r *http.Request) string {
	if op == adapters.OpEmbedding && r != nil && strings.HasPrefix(r.URL.Path, "/v1/engines/") {
		return engineModel(r.URL.Path)
	}
	return adapters.PeekModel(body)
}
