package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// DecodeRequest implements adapters.Dialect.
func (Adapter) DecodeRequest(op adapters.Operation, body []byte, r *http.Request) (*adapters.Request, error) {
	req := &adapters.Request{Op: op, Dialect: Name, Raw: body}
	if r != nil {
		req.Header = r.Header
	}
	switch op {
	case adapters.OpListModels:
		return req, nil
	case adapters.OpGetModel:
		if r != nil {
			req.Model = strings.TrimPrefix(r.URL.Path, "/v1/models/")
		}
		return req, nil
	case adapters.OpChat:
		var w chatRequest
		if err := decodeChat(body, &w); err != nil {
			return nil, err
		}
		chat, err := chatToNeutral(&w)
		if err != nil {
			return nil, err
		}
		req.Model, req.Stream, req.Chat = w.Model, w.Stream, chat
		req.IncludeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
		if len(w.Messages) == 0 {
			return nil, adapters.BadRequest("'messages' must be a non-empty array of messages")
		}
	case adapters.OpResponses:
		if err := decodeResponses(req, body); err != nil {
			return nil, err
		}
	case adapters.OpRerank:
		if err := decodeRerank(req, body, r); err != nil {
			return nil, err
		}
	case adapters.OpCompletion:
		var w completionRequest
		if err := adapters.DecodeJSON(body, &w); err != nil {
			return nil, err
		}
		prompt, err := textOrTokens("prompt", w.Prompt)
		if err != nil {
			return nil, err
		}
		req.Model, req.Stream = w.Model, w.Stream
		req.IncludeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
		req.Completion = &adapters.CompletionRequest{Prompt: prompt, MaxTokens: w.MaxTokens, Choices: w.N}
		if w.BestOf != nil && (w.N == nil || *w.BestOf > *w.N) {
			req.Completion.Choices = w.BestOf
		}
	case adapters.OpEmbedding:
		var w embeddingRequest
		if err := adapters.DecodeJSON(body, &w); err != nil {
			return nil, err
		}
		if r != nil {
			if m := engineModel(r.URL.Path); m != "" && strings.HasPrefix(r.URL.Path, "/v1/engines/") {
				w.Model = m
			}
		}
		input, err := textOrTokens("input", w.Input)
		if err != nil {
			return nil, err
		}
		switch w.EncodingFormat {
		case "", "float", "base64":
		default:
			return nil, adapters.BadRequest("'encoding_format' must be \"float\" or \"base64\", not %q", w.EncodingFormat)
		}
		req.Model = w.Model
		req.Embedding = &adapters.EmbeddingRequest{Input: input, EncodingFormat: w.EncodingFormat, Dimensions: w.Dimensions}
	case adapters.OpImage, adapters.OpSpeech, adapters.OpTranscription:
		if err := decodeMedia(req, body, r); err != nil {
			return nil, err
		}
	default:
		return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "this endpoint is not supported by the gateway yet")
	}
	if req.Model == "" {
		return nil, adapters.BadRequest("'model' is required: name the model to use, for example \"gpt-4o-mini\" (GET /v1/models lists the models your key may use)")
	}
	return req, nil
}

// textOrTokens reads a prompt or an embedding input: a string, an array of
// strings, an array of token ids or an array of token arrays. Token arrays
// are kept as one placeholder word per token, so they count but carry no text.
func textOrTokens(field string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, adapters.BadRequest("'%s' is required: a string or an array of strings", field)
	}
	var list stringList
	if err := json.Unmarshal(raw, &list); err == nil {
		if len(list) == 0 {
			return nil, adapters.BadRequest("'%s' must not be empty", field)
		}
		return list, nil
	}
	var tokens [][]int64
	if err := json.Unmarshal(raw, &tokens); err == nil && len(tokens) > 0 {
		out := make([]string, len(tokens))
		for i, t := range tokens {
			out[i] = strings.Repeat("x ", len(t))
		}
		return out, nil
	}
	var oneTokens []int64
	if err := json.Unmarshal(raw, &oneTokens); err == nil && len(oneTokens) > 0 {
		return []string{strings.Repeat("x ", len(oneTokens))}, nil
	}
	return nil, adapters.BadRequest("invalid type for '%s': expected a string, an array of strings, an array of token ids or an array of token arrays", field)
}

func chatToNeutral(w *chatRequest) (*adapters.ChatRequest, error) {
	c := &adapters.ChatRequest{
		ParallelToolCalls: w.ParallelToolCalls,
		MaxTokens:         w.MaxCompletionTokens,
		Temperature:       w.Temperature,
		TopP:              w.TopP,
		Stop:              w.Stop,
		N:                 w.N,
		Seed:              w.Seed,
		PresencePenalty:   w.PresencePenalty,
		FrequencyPenalty:  w.FrequencyPenalty,
		User:              w.User,
		CacheKey:          w.PromptCacheKey,
	}
	if c.MaxTokens == nil {
		c.MaxTokens = w.MaxTokens
	}
	if w.ReasoningEffort != "" {
		c.Reasoning = &adapters.Reasoning{Effort: w.ReasoningEffort}
	}
	if rf := w.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "json_object", "json_schema":
		default:
			return nil, adapters.BadRequest("'response_format.type' must be text, json_object or json_schema, not %q", rf.Type)
		}
		c.ResponseFormat = &adapters.ResponseFormat{Type: rf.Type}
		if rf.JSONSchema != nil {
			c.ResponseFormat.Name = rf.JSONSchema.Name
			c.ResponseFormat.Schema = rf.JSONSchema.Schema
			c.ResponseFormat.Strict = rf.JSONSchema.Strict
		}
	}
	for i, t := range w.Tools {
		if t.Type != "function" {
			c.Tools = append(c.Tools, adapters.Tool{Type: t.Type, Name: t.Function.Name})
			continue
		}
		if t.Function.Name == "" {
			return nil, adapters.BadRequest("'tools[%d].function.name' is required", i)
		}
		c.Tools = append(c.Tools, adapters.Tool{Type: "function", Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict})
	}
	if len(w.ToolChoice) > 0 && !bytes.Equal(w.ToolChoice, []byte("null")) {
		tc, err := toolChoiceToNeutral(w.ToolChoice)
		if err != nil {
			return nil, err
		}
		c.ToolChoice = tc
	}
	for i := range w.Messages {
		m := &w.Messages[i]
		switch m.Role {
		case "system", "developer":
			c.System = append(c.System, textParts(m.Content)...)
		case "user":
			parts, err := contentToParts(m.Content, i)
			if err != nil {
				return nil, err
			}
			c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleUser, Parts: parts})
		case "assistant":
			var parts []adapters.Part
			if r := m.reasoning(); r != "" {
				parts = append(parts, adapters.Part{Type: adapters.PartThinking, Text: r})
			}
			content, err := contentToParts(m.Content, i)
			if err != nil {
				return nil, err
			}
			parts = append(parts, content...)
			if m.Refusal != nil && *m.Refusal != "" && len(content) == 0 {
				parts = append(parts, adapters.Part{Type: adapters.PartText, Text: *m.Refusal})
			}
			for _, tc := range m.ToolCalls {
				parts = append(parts, adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
			}
			c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleAssistant, Parts: parts})
		case "tool", "function":
			if m.Role == "tool" && m.ToolCallID == "" {
				return nil, adapters.BadRequest("'messages[%d].tool_call_id' is required for a tool message", i)
			}
			content, err := contentToParts(m.Content, i)
			if err != nil {
				return nil, err
			}
			id := m.ToolCallID
			if id == "" {
				id = m.Name
			}
			c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleTool, Parts: []adapters.Part{{
				Type:       adapters.PartToolResult,
				ToolResult: &adapters.ToolResult{CallID: id, Name: m.Name, Content: content},
			}}})
		case "":
			return nil, adapters.BadRequest("'messages[%d].role' is required", i)
		default:
			return nil, adapters.BadRequest("'messages[%d].role' must be one of system, developer, user, assistant, tool; got %q", i, m.Role)
		}
	}
	fillToolResultNames(c.Messages)
	return c, nil
}

// fillToolResultNames gives each tool result the name of the call it
// answers, which some vendors require and OpenAI's tool messages omit.
func fillToolResultNames(msgs []adapters.Message) {
	names := map[string]string{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch {
			case p.ToolCall != nil:
				names[p.ToolCall.ID] = p.ToolCall.Name
			case p.ToolResult != nil && p.ToolResult.Name == "":
				p.ToolResult.Name = names[p.ToolResult.CallID]
			}
		}
	}
}

func toolChoiceToNeutral(raw json.RawMessage) (*adapters.ToolChoice, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return &adapters.ToolChoice{Mode: s}, nil
		}
		return nil, adapters.BadRequest("'tool_choice' must be auto, none, required or an object naming a function; got %q", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type == "" {
		return nil, adapters.BadRequest("'tool_choice' must be auto, none, required or an object such as {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	if obj.Type != "function" {
		// allowed_tools, custom and later kinds pass through to OpenAI
		// channels; translating them to another vendor is refused there
		return &adapters.ToolChoice{Mode: obj.Type}, nil
	}
	if obj.Function.Name == "" {
		return nil, adapters.BadRequest("'tool_choice.function.name' is required")
	}
	return &adapters.ToolChoice{Mode: adapters.ToolChoiceTool, Name: obj.Function.Name}, nil
}

func textParts(c messageContent) []adapters.Part {
	if c.Text != nil {
		return []adapters.Part{{Type: adapters.PartText, Text: *c.Text}}
	}
	var out []adapters.Part
	for _, p := range c.Parts {
		if p.Type == "text" {
			out = append(out, adapters.Part{Type: adapters.PartText, Text: p.Text})
		}
	}
	return out
}

func contentToParts(c messageContent, msgIndex int) ([]adapters.Part, error) {
	if c.Text != nil {
		if *c.Text == "" {
			return nil, nil
		}
		return []adapters.Part{{Type: adapters.PartText, Text: *c.Text}}, nil
	}
	out := make([]adapters.Part, 0, len(c.Parts))
	for j, p := range c.Parts {
		switch p.Type {
		case "text":
			out = append(out, adapters.Part{Type: adapters.PartText, Text: p.Text})
		case "refusal":
			out = append(out, adapters.Part{Type: adapters.PartText, Text: p.Refusal})
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, adapters.BadRequest("'messages[%d].content[%d].image_url.url' is required", msgIndex, j)
			}
			img, err := ParseImageURL(p.ImageURL.URL)
			if err != nil {
				return nil, adapters.BadRequest("'messages[%d].content[%d].image_url.url': %v", msgIndex, j, err)
			}
			img.Detail = p.ImageURL.Detail
			out = append(out, adapters.Part{Type: adapters.PartImage, Image: img})
		case "":
			return nil, adapters.BadRequest("'messages[%d].content[%d].type' is required", msgIndex, j)
		default:
			// audio, files and the like: carried as a vendor part so a
			// translation refuses it instead of dropping it
			out = append(out, adapters.Part{Type: adapters.PartType(p.Type)})
		}
	}
	return out, nil
}

// ParseImageURL reads an image_url value: a data: URL with base64 bytes, or
// an http(s) URL left for the upstream (or the relay) to fetch.
func ParseImageURL(u string) (*adapters.Image, error) {
	if strings.HasPrefix(u, "data:") {
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return nil, fmt.Errorf("a data URL must look like data:image/png;base64,<data>")
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("the data URL's base64 is invalid: %v", err)
		}
		return &adapters.Image{MediaType: strings.TrimSuffix(meta, ";base64"), Data: b}, nil
	}
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return &adapters.Image{URL: u}, nil
	}
	return nil, fmt.Errorf("must be an http(s) URL or a base64 data URL")
}
