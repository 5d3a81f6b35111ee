package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// DecodeRequest implements adapters.Dialect.
func (Adapter) DecodeRequest(op adapters.Operation, body []byte, r *http.Request) (*adapters.Request, error) {
	// Anthropic streams always carry usage, so a translated stream shows it too.
	req := &adapters.Request{Op: op, Dialect: Name, Raw: body, IncludeUsage: true}
	if r != nil {
		req.Header = r.Header
	}
	switch op {
	case adapters.OpListModels:
		return req, nil
	case adapters.OpGetModel:
		if r != nil {
			req.Model = modelID(r.URL.Path)
		}
		return req, nil
	case adapters.OpChat, adapters.OpCountTokens:
	default:
		return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "this endpoint is not supported by the gateway")
	}
	if r != nil && strings.TrimSpace(r.Header.Get("Anthropic-Version")) == "" {
		return nil, adapters.BadRequest("the anthropic-version header is required: send the Messages API version, for example \"anthropic-version: %s\" (Anthropic's SDKs send it for you)", DefaultVersion)
	}
	var w messagesRequest
	if err := adapters.DecodeJSON(body, &w); err != nil {
		return nil, err
	}
	if w.Model == "" {
		return nil, adapters.BadRequest("'model' is required: name the model to use, for example \"claude-sonnet-4-5\" (GET /v1/models lists the models your key may use)")
	}
	if op == adapters.OpChat {
		if w.MaxTokens == nil {
			return nil, adapters.BadRequest("'max_tokens' is required: the maximum number of tokens to generate, for example 1024")
		}
		if *w.MaxTokens < 1 {
			return nil, adapters.BadRequest("'max_tokens' must be at least 1, got %d", *w.MaxTokens)
		}
		req.Stream = w.Stream
	}
	if len(w.Messages) == 0 {
		return nil, adapters.BadRequest("'messages' must be a non-empty array of {\"role\",\"content\"} messages")
	}
	chat, err := chatToNeutral(&w)
	if err != nil {
		return nil, err
	}
	req.Model, req.Chat = w.Model, chat
	return req, nil
}

func chatToNeutral(w *messagesRequest) (*adapters.ChatRequest, error) {
	c := &adapters.ChatRequest{
		MaxTokens:   w.MaxTokens,
		Temperature: w.Temperature,
		TopP:        w.TopP,
		TopK:        w.TopK,
		Stop:        w.StopSequences,
	}
	if w.Metadata != nil {
		c.User, c.Session = w.Metadata.UserID, w.Metadata.UserID
	}
	if w.System != nil {
		for i, b := range w.System.Blocks {
			if b.Type != "text" {
				return nil, adapters.BadRequest("'system.%d.type' must be \"text\", got %q", i, b.Type)
			}
			c.System = append(c.System, adapters.Part{Type: adapters.PartText, Text: b.Text})
		}
	}
	if t := w.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if t.BudgetTokens < 1 {
				return nil, adapters.BadRequest("'thinking.budget_tokens' is required when thinking is enabled, for example 2048")
			}
			c.Reasoning = &adapters.Reasoning{BudgetTokens: t.BudgetTokens}
		case "adaptive":
			c.Reasoning = &adapters.Reasoning{Effort: "medium"}
		case "disabled":
		default:
			return nil, adapters.BadRequest("'thinking.type' must be enabled, adaptive or disabled, got %q", t.Type)
		}
	}
	if oc := w.OutputConfig; oc != nil {
		if oc.Effort != "" {
			if c.Reasoning == nil {
				c.Reasoning = &adapters.Reasoning{}
			}
			c.Reasoning.Effort = oc.Effort
		}
		if f := oc.Format; f != nil {
			if f.Type != "json_schema" {
				return nil, adapters.BadRequest("'output_config.format.type' must be \"json_schema\", got %q", f.Type)
			}
			c.ResponseFormat = &adapters.ResponseFormat{Type: "json_schema", Schema: f.Schema}
		}
	}
	for i, t := range w.Tools {
		if t.Name == "" {
			return nil, adapters.BadRequest("'tools.%d.name' is required", i)
		}
		if t.Type != "" && t.Type != "custom" {
			c.Tools = append(c.Tools, adapters.Tool{Type: t.Type, Name: t.Name})
			continue
		}
		c.Tools = append(c.Tools, adapters.Tool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict})
	}
	for _, m := range w.MCPServers {
		// Anthropic's MCP connector: tools only Anthropic can reach
		c.Tools = append(c.Tools, adapters.Tool{Type: "mcp", Name: m.Name})
	}
	if tc := w.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceAuto}
		case "any":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceRequired}
		case "none":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceNone}
		case "tool":
			if tc.Name == "" {
				return nil, adapters.BadRequest("'tool_choice.name' is required when tool_choice.type is \"tool\"")
			}
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceTool, Name: tc.Name}
		default:
			return nil, adapters.BadRequest("'tool_choice.type' must be auto, any, tool or none, got %q", tc.Type)
		}
		if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
			no := false
			c.ParallelToolCalls = &no
		}
	}
	names := map[string]string{} // tool_use id -> tool name, for the results
	for i, m := range w.Messages {
		var parts []adapters.Part
		var err error
		switch m.Role {
		case "user":
			parts, err = userParts(m.Content.Blocks, i, names)
		case "assistant":
			parts, err = assistantParts(m.Content.Blocks, i, names)
		case "system":
			// a mid-conversation instruction (Claude Code sends them with a
			// beta flag): an Anthropic channel gets the body as it is, the
			// others the instruction at its place
			for j, b := range m.Content.Blocks {
				if b.Type != "text" {
					return nil, adapters.BadRequest("messages.%d.content.%d.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'text'", i, j, b.Type)
				}
				parts = append(parts, adapters.Part{Type: adapters.PartText, Text: b.Text})
			}
			c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleSystem, Parts: parts})
			continue
		case "":
			return nil, adapters.BadRequest("'messages.%d.role' is required", i)
		default:
			return nil, adapters.BadRequest("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		if err != nil {
			return nil, err
		}
		role := adapters.RoleAssistant
		if m.Role == "user" {
			role = adapters.RoleUser
			if onlyToolResults(parts) {
				role = adapters.RoleTool
			}
		}
		c.Messages = append(c.Messages, adapters.Message{Role: role, Parts: parts})
	}
	return c, nil
}

func onlyToolResults(parts []adapters.Part) bool {
	for _, p := range parts {
		if p.Type != adapters.PartToolResult {
			return false
		}
	}
	return len(parts) > 0
}

func userParts(blocks []block, i int, names map[string]string) ([]adapters.Part, error) {
	var out []adapters.Part
	for j, b := range blocks {
		at := func(field string) string { return pathOf(i, j, field) }
		switch b.Type {
		case "text":
			out = append(out, adapters.Part{Type: adapters.PartText, Text: b.Text})
		case "image":
			p, err := imagePart(b.Source, at("source"))
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, adapters.BadRequest("'%s' is required", at("tool_use_id"))
			}
			r := &adapters.ToolResult{CallID: b.ToolUseID, Name: names[b.ToolUseID], IsError: b.IsError}
			if b.Content != nil {
				for k, rb := range b.Content.Blocks {
					switch rb.Type {
					case "text":
						r.Content = append(r.Content, adapters.Part{Type: adapters.PartText, Text: rb.Text})
					case "image":
						p, err := imagePart(rb.Source, at("content."+itoa(k)+".source"))
						if err != nil {
							return nil, err
						}
						r.Content = append(r.Content, p)
					case "":
						return nil, adapters.BadRequest("'%s' is required", at("content."+itoa(k)+".type"))
					default:
						r.Content = append(r.Content, adapters.Part{Type: adapters.PartType(rb.Type)})
					}
				}
			}
			out = append(out, adapters.Part{Type: adapters.PartToolResult, ToolResult: r})
		case "":
			return nil, adapters.BadRequest("'%s' is required", at("type"))
		default:
			// document, search_result, container_upload, ...: kept so a
			// translation refuses them instead of dropping them
			out = append(out, adapters.Part{Type: adapters.PartType(b.Type)})
		}
	}
	return out, nil
}

func assistantParts(blocks []block, i int, names map[string]string) ([]adapters.Part, error) {
	var out []adapters.Part
	for j, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != "" {
				out = append(out, adapters.Part{Type: adapters.PartText, Text: b.Text})
			}
		case "thinking":
			p := adapters.Part{Type: adapters.PartThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = adapters.TagSignature(Name, *b.Signature)
			}
			out = append(out, p)
		case "redacted_thinking":
			out = append(out, adapters.Part{Type: adapters.PartThinking, Redacted: b.Data})
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, adapters.BadRequest("'%s' and '%s' are required", pathOf(i, j, "id"), pathOf(i, j, "name"))
			}
			names[b.ID] = b.Name
			out = append(out, adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: b.ID, Name: b.Name, Arguments: inputText(b.Input)}})
		case "":
			return nil, adapters.BadRequest("'%s' is required", pathOf(i, j, "type"))
		default:
			// server_tool_use, web_search_tool_result and the like
			out = append(out, adapters.Part{Type: adapters.PartType(b.Type)})
		}
	}
	return out, nil
}

// inputText is a tool_use input as the JSON object text neutral form keeps.
func inputText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func imagePart(s *source, at string) (adapters.Part, error) {
	if s == nil {
		return adapters.Part{}, adapters.BadRequest("'%s' is required", at)
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" {
			return adapters.Part{}, adapters.BadRequest("'%s.media_type' is required, for example \"image/png\"", at)
		}
		data, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return adapters.Part{}, adapters.BadRequest("'%s.data' is not valid base64: %v", at, err)
		}
		return adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{MediaType: s.MediaType, Data: data}}, nil
	case "url":
		if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return adapters.Part{}, adapters.BadRequest("'%s.url' must be an http(s) URL", at)
		}
		return adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{URL: s.URL}}, nil
	case "file":
		// a Files API id only Anthropic can resolve
		return adapters.Part{Type: "file"}, nil
	}
	return adapters.Part{}, adapters.BadRequest("'%s.type' must be base64, url or file, got %q", at, s.Type)
}

func pathOf(i, j int, field string) string {
	return "messages." + itoa(i) + ".content." + itoa(j) + "." + field
}

func itoa(i int) string { return strconv.Itoa(i) }
