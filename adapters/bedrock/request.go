package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
)

// NewRequest implements adapters.ChatProvider: a conversation becomes a
// Converse (or ConverseStream) call to the model's path, signed last.
func (a Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Op == adapters.OpEmbedding {
		return a.newEmbedRequest(ctx, up, req)
	}
	if !req.Op.Conversation() {
		return nil, adapters.Unsupported("channel %q (bedrock) does not serve %s requests: it serves chat through Bedrock's Converse API and embeddings", up.Channel, req.Op)
	}
	if req.Chat == nil {
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type bedrock", req.Op)
	}
	if err := req.Translatable(); err != nil {
		return nil, err
	}
	w, err := encodeConverse(ctx, req, up.Model)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding the converse request: %w", err)
	}
	op := "/converse"
	if req.Stream {
		op = "/converse-stream"
	}
	base := strings.TrimRight(up.BaseURL, "/")
	target, err := url.Parse(base + "/model/" + modelPath(up.Model) + op)
	if err != nil {
		return nil, fmt.Errorf("channel %q: base_url: %w", up.Channel, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if req.Stream {
		hr.Header.Set("Accept", "application/vnd.amazon.eventstream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	if err := a.authorize(ctx, hr, up.Key, body); err != nil {
		return nil, fmt.Errorf("channel %q: %w", up.Channel, err)
	}
	return hr, nil
}

// modelPath escapes a model id, an inference profile id or an ARN as one
// path segment, as AWS's SDKs do (the ':' of a version and the '/' of an
// ARN included).
func modelPath(model string) string {
	return strings.ReplaceAll(url.PathEscape(model), ":", "%3A")
}

// encodeConverse renders a neutral conversation as a Converse body.
func encodeConverse(ctx context.Context, req *adapters.Request, model string) (*converseRequest, error) {
	c := req.Chat
	if err := checkSampling(c); err != nil {
		return nil, err
	}
	w := &converseRequest{}
	ic := &inferenceConfig{Temperature: c.Temperature, TopP: c.TopP, StopSequences: c.Stop}
	ic.MaxTokens = c.MaxTokens
	if ic.MaxTokens == nil && req.OutputAllowance > 0 {
		n := req.OutputAllowance
		ic.MaxTokens = &n
	}
	if ic.MaxTokens != nil || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		w.InferenceConfig = ic
	}
	extra, err := modelFields(c, model)
	if err != nil {
		return nil, err
	}
	w.AdditionalModelRequestFields = extra
	system, turns := c.HoistSystem()
	for _, p := range system {
		if p.Type != adapters.PartText {
			return nil, adapters.Unsupported("a system prompt with %s content cannot be sent to a Bedrock channel", p.Type)
		}
		if p.Text != "" {
			w.System = append(w.System, systemBlock{Text: p.Text})
		}
	}
	msgs, hasToolBlocks, err := messagesToWire(ctx, turns)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, adapters.BadRequest("the conversation has no message with content to send")
	}
	w.Messages = msgs
	w.ToolConfig, err = toolsToWire(c, hasToolBlocks)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// checkSampling refuses what Converse has no field for, when the client
// set it to something that would change the answer.
func checkSampling(c *adapters.ChatRequest) error {
	switch {
	case c.N != nil && *c.N > 1:
		return adapters.Unsupported("'n' = %d cannot be sent to a Bedrock channel: Converse returns one answer per request", *c.N)
	case c.Seed != nil:
		return adapters.Unsupported("'seed' cannot be sent to a Bedrock channel: Converse has no such parameter")
	case c.PresencePenalty != nil && *c.PresencePenalty != 0:
		return adapters.Unsupported("'presence_penalty' cannot be sent to a Bedrock channel: Converse has no such parameter")
	case c.FrequencyPenalty != nil && *c.FrequencyPenalty != 0:
		return adapters.Unsupported("'frequency_penalty' cannot be sent to a Bedrock channel: Converse has no such parameter")
	}
	if rf := c.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return adapters.Unsupported("response format %q cannot be sent to a Bedrock channel: Converse has no JSON mode (describe the shape in the prompt, or use a tool)", rf.Type)
	}
	return nil
}

// claude reports whether a Bedrock model id (or inference profile, or
// ARN) is one of Anthropic's, which take top_k and a thinking budget in
// additionalModelRequestFields.
func claude(model string) bool {
	return strings.Contains(model, "anthropic.claude")
}

// modelFields renders the model-specific fields Converse passes on in
// additionalModelRequestFields: top_k and thinking, for Claude only; other
// models get neither.
func modelFields(c *adapters.ChatRequest, model string) (json.RawMessage, error) {
	budget := anthropic.ThinkingBudget(c.Reasoning) // Claude's own budget_tokens
	if c.TopK == nil && budget == 0 {
		return nil, nil
	}
	if !claude(model) {
		// Both are hints every coding agent sends (Claude Code asks for
		// thinking, Gemini CLI sets topK): another model answers without
		// them, as it would had the agent not asked, rather than the agent
		// failing on every call.
		return nil, nil
	}
	f := map[string]any{}
	if c.TopK != nil {
		f["top_k"] = *c.TopK
	}
	if budget > 0 {
		f["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget}
	}
	return json.Marshal(f)
}

// toolsToWire renders the tools and the choice among them. Converse has
// no "none": a conversation that never used tools simply goes without
// them; one that did needs its toolConfig, so "none" is refused there.
func toolsToWire(c *adapters.ChatRequest, hasToolBlocks bool) (*toolConfig, error) {
	if len(c.Tools) == 0 {
		return nil, nil
	}
	if tc := c.ToolChoice; tc != nil && tc.Mode == adapters.ToolChoiceNone {
		if hasToolBlocks {
			return nil, adapters.Unsupported("tool_choice \"none\" cannot be sent to a Bedrock channel in a conversation that used tools: Converse has no such choice")
		}
		return nil, nil
	}
	tcfg := &toolConfig{}
	for _, t := range c.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, adapters.Unsupported("tool %q of type %q cannot be sent to a Bedrock channel: only function tools translate", t.Name, t.Type)
		}
		schema := t.Parameters
		if s := bytes.TrimSpace(schema); len(s) == 0 || bytes.Equal(s, []byte("null")) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tcfg.Tools = append(tcfg.Tools, toolSpecBlock{ToolSpec: toolSpec{Name: t.Name, Description: t.Description, InputSchema: inputSchema{JSON: schema}}})
	}
	if tc := c.ToolChoice; tc != nil {
		switch tc.Mode {
		case adapters.ToolChoiceRequired:
			tcfg.ToolChoice = &toolChoice{Any: &struct{}{}}
		case adapters.ToolChoiceTool:
			tcfg.ToolChoice = &toolChoice{Tool: &specificTool{Name: tc.Name}}
		default:
			tcfg.ToolChoice = &toolChoice{Auto: &struct{}{}}
		}
	}
	return tcfg, nil
}

// messagesToWire renders the turns: tool results travel in user messages,
// and consecutive messages of one role are merged, as Converse wants the
// roles to alternate.
func messagesToWire(ctx context.Context, turns []adapters.Message) (out []message, hasToolBlocks bool, err error) {
	for _, m := range turns {
		role := "user"
		switch m.Role {
		case adapters.RoleUser, adapters.RoleTool:
		case adapters.RoleAssistant:
			role = "assistant"
		default:
			return nil, false, adapters.BadRequest("unknown message role %q", m.Role)
		}
		var blocks []contentBlock
		for _, p := range m.Parts {
			b, ok, err := partToWire(ctx, p, role)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				continue
			}
			hasToolBlocks = hasToolBlocks || b.ToolUse != nil || b.ToolResult != nil
			blocks = append(blocks, b)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
		} else {
			out = append(out, message{Role: role, Content: blocks})
		}
	}
	return out, hasToolBlocks, nil
}

// partToWire renders one part; ok is false for a part with nothing to send.
func partToWire(ctx context.Context, p adapters.Part, role string) (contentBlock, bool, error) {
	switch p.Type {
	case adapters.PartText:
		if p.Text == "" {
			return contentBlock{}, false, nil
		}
		t := p.Text
		return contentBlock{Text: &t}, true, nil
	case adapters.PartImage:
		if role != "user" {
			return contentBlock{}, false, adapters.Unsupported("an assistant message with an image cannot be sent to a Bedrock channel")
		}
		img, err := imageToWire(ctx, p.Image)
		if err != nil {
			return contentBlock{}, false, err
		}
		return contentBlock{Image: img}, true, nil
	case adapters.PartToolCall:
		tc := p.ToolCall
		if role != "assistant" || tc == nil {
			return contentBlock{}, false, adapters.BadRequest("a tool call can only be in an assistant message")
		}
		input := json.RawMessage(strings.TrimSpace(tc.Arguments))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(input, &obj) != nil {
			return contentBlock{}, false, adapters.BadRequest("the arguments of tool call %q (%s) are not a JSON object, so they cannot be sent to a Bedrock channel", tc.ID, tc.Name)
		}
		return contentBlock{ToolUse: &toolUse{ToolUseID: tc.ID, Name: tc.Name, Input: input}}, true, nil
	case adapters.PartToolResult:
		tr := p.ToolResult
		if role != "user" || tr == nil {
			return contentBlock{}, false, adapters.BadRequest("a tool result can only be in a user or tool message")
		}
		r := &toolResult{ToolUseID: tr.CallID, Content: []toolResultContent{}}
		if tr.IsError {
			r.Status = "error"
		}
		for _, rp := range tr.Content {
			switch rp.Type {
			case adapters.PartText:
				t := rp.Text
				r.Content = append(r.Content, toolResultContent{Text: &t})
			case adapters.PartImage:
				img, err := imageToWire(ctx, rp.Image)
				if err != nil {
					return contentBlock{}, false, err
				}
				r.Content = append(r.Content, toolResultContent{Image: img})
			default:
				return contentBlock{}, false, adapters.Unsupported("a tool result with %s content cannot be sent to a Bedrock channel", rp.Type)
			}
		}
		if len(r.Content) == 0 {
			empty := ""
			r.Content = append(r.Content, toolResultContent{Text: &empty})
		}
		return contentBlock{ToolResult: r}, true, nil
	case adapters.PartThinking:
		if role != "assistant" {
			return contentBlock{}, false, nil
		}
		// only Bedrock's own reasoning goes back: another vendor's
		// signature would be refused
		if p.Redacted != "" {
			return contentBlock{}, false, nil
		}
		sig, ok := adapters.UntagSignature(Name, p.Signature)
		if !ok || sig == "" {
			return contentBlock{}, false, nil
		}
		return contentBlock{ReasoningContent: &reasoningContent{ReasoningText: &reasoningText{Text: p.Text, Signature: sig}}}, true, nil
	}
	return contentBlock{}, false, adapters.Unsupported("content of type %q cannot be sent to a Bedrock channel", p.Type)
}

// imageFormats are the image types Converse takes, by media type.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

func imageToWire(ctx context.Context, img *adapters.Image) (*imageBlock, error) {
	if img == nil {
		return nil, adapters.BadRequest("an image part has no image")
	}
	if img.Data == nil && img.URL != "" {
		fetched, err := adapters.FetchImage(ctx, img.URL)
		if err != nil {
			return nil, err
		}
		img = fetched
	}
	format, ok := imageFormats[img.MediaType]
	if !ok {
		return nil, adapters.Unsupported("an image of type %q cannot be sent to a Bedrock channel: it takes image/png, image/jpeg, image/gif and image/webp", img.MediaType)
	}
	return &imageBlock{Format: format, Source: imageSource{Bytes: img.Data}}, nil
}
