package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// DefaultMaxTokens is the max_tokens a translated request gets when the
// client set no limit and the channel's adapter sets no max_tokens:
// Anthropic requires one.
const DefaultMaxTokens int64 = 4096

// minThinkingBudget is the smallest budget_tokens Anthropic takes.
const minThinkingBudget = 1024

// EncodeChatRequest renders a neutral chat as a Messages API body for the
// given upstream model. What Anthropic cannot take is refused with a 400.
func EncodeChatRequest(req *adapters.Request, model string) ([]byte, error) {
	return encodeChat(req, model, DefaultMaxTokens, false)
}

// allowance is the max_tokens of a request whose client set none: what
// the gateway reserved, else the channel's default.
func allowance(req *adapters.Request, channelDefault int64) int64 {
	if req.OutputAllowance > 0 {
		return req.OutputAllowance
	}
	return channelDefault
}

// encodeChat is EncodeChatRequest with the allowance a request without a
// limit gets.
func encodeChat(req *adapters.Request, model string, defaultMax int64, autoCache bool) ([]byte, error) {
	w, err := requestToWire(req, model, true, allowance(req, defaultMax))
	if err != nil {
		return nil, err
	}
	if autoCache {
		markCache(w)
	}
	return json.Marshal(w)
}

// EncodeCountTokensRequest renders a neutral chat as a count_tokens body:
// the messages, system prompt, tools and thinking, which are what count.
func EncodeCountTokensRequest(req *adapters.Request, model string) ([]byte, error) {
	w, err := requestToWire(req, model, false, DefaultMaxTokens)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

func requestToWire(req *adapters.Request, model string, generate bool, defaultMax int64) (*messagesRequest, error) {
	c := req.Chat
	if c == nil {
		return nil, adapters.BadRequest("the request has no conversation to send")
	}
	w := &messagesRequest{Model: model}
	if generate {
		if err := checkSampling(c); err != nil {
			return nil, err
		}
		w.Stream = req.Stream
		w.Temperature, w.TopP, w.TopK, w.StopSequences = c.Temperature, c.TopP, c.TopK, c.Stop
		if c.User != "" {
			w.Metadata = &metadata{UserID: c.User}
		}
		maxTokens := defaultMax
		if c.MaxTokens != nil {
			maxTokens = *c.MaxTokens
		}
		if budget := ThinkingBudget(c.Reasoning); budget > 0 {
			switch {
			case c.MaxTokens == nil && budget >= maxTokens:
				maxTokens = budget + defaultMax
			case budget >= maxTokens:
				// the client's limit covers thinking and answer together
				budget = max(maxTokens/2, minThinkingBudget)
			}
			if budget < maxTokens {
				w.Thinking = &thinkingConfig{Type: "enabled", BudgetTokens: budget}
			}
		}
		w.MaxTokens = &maxTokens
		if rf := c.ResponseFormat; rf != nil {
			switch rf.Type {
			case "json_schema":
				if len(rf.Schema) == 0 {
					return nil, adapters.Unsupported("'response_format' json_schema needs a schema to be sent to an Anthropic channel")
				}
				w.OutputConfig = &outputConfig{Format: &outputFormat{Type: "json_schema", Schema: rf.Schema}}
			case "json_object":
				return nil, adapters.Unsupported("JSON mode without a schema (response_format json_object) cannot be sent to an Anthropic channel: give a json_schema instead")
			case "text", "":
			default:
				return nil, adapters.Unsupported("response format %q cannot be sent to an Anthropic channel", rf.Type)
			}
		}
	} else if budget := ThinkingBudget(c.Reasoning); budget > 0 {
		w.Thinking = &thinkingConfig{Type: "enabled", BudgetTokens: budget}
	}
	// instructions given mid-conversation join the others: the vendor
	// takes them in one place
	system, turns := c.HoistSystem()
	for _, p := range system {
		if p.Type != adapters.PartText {
			return nil, adapters.Unsupported("a system prompt with %s content cannot be sent to an Anthropic channel", p.Type)
		}
		if p.Text == "" {
			continue
		}
		if w.System == nil {
			w.System = &content{}
		}
		w.System.Blocks = append(w.System.Blocks, block{Type: "text", Text: p.Text})
	}
	for _, t := range c.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, adapters.Unsupported("tool %q of type %q cannot be sent to an Anthropic channel: only function tools translate", t.Name, t.Type)
		}
		schema := t.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema, Strict: t.Strict})
	}
	if len(w.Tools) > 0 {
		if tc := c.ToolChoice; tc != nil {
			switch tc.Mode {
			case adapters.ToolChoiceRequired:
				w.ToolChoice = &toolChoice{Type: "any"}
			case adapters.ToolChoiceNone:
				w.ToolChoice = &toolChoice{Type: "none"}
			case adapters.ToolChoiceTool:
				w.ToolChoice = &toolChoice{Type: "tool", Name: tc.Name}
			default:
				w.ToolChoice = &toolChoice{Type: "auto"}
			}
		}
		if p := c.ParallelToolCalls; p != nil && !*p {
			if w.ToolChoice == nil {
				w.ToolChoice = &toolChoice{Type: "auto"}
			}
			if w.ToolChoice.Type != "none" {
				yes := true
				w.ToolChoice.DisableParallelToolUse = &yes
			}
		}
	}
	msgs, err := messagesToWire(turns)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, adapters.BadRequest("the conversation has no message with content to send")
	}
	w.Messages = msgs
	return w, nil
}

// checkSampling refuses parameters Anthropic has no equivalent for, when
// the client set them to something that would change the answer.
func checkSampling(c *adapters.ChatRequest) error {
	switch {
	case c.N != nil && *c.N > 1:
		return adapters.Unsupported("'n' = %d cannot be sent to an Anthropic channel: it returns one answer per request", *c.N)
	case c.Seed != nil:
		return adapters.Unsupported("'seed' cannot be sent to an Anthropic channel: it has no such parameter")
	case c.PresencePenalty != nil && *c.PresencePenalty != 0:
		return adapters.Unsupported("'presence_penalty' cannot be sent to an Anthropic channel: it has no such parameter")
	case c.FrequencyPenalty != nil && *c.FrequencyPenalty != 0:
		return adapters.Unsupported("'frequency_penalty' cannot be sent to an Anthropic channel: it has no such parameter")
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 1):
		return adapters.Unsupported("'temperature' %v is outside the range an Anthropic channel takes (0 to 1)", *c.Temperature)
	}
	return nil
}

// ThinkingBudget turns a neutral reasoning request into Claude's
// budget_tokens; 0 means no thinking. Exported for the clouds that serve
// Claude with its own thinking field (Bedrock).
func ThinkingBudget(r *adapters.Reasoning) int64 {
	if r == nil {
		return 0
	}
	if r.BudgetTokens > 0 {
		return max(r.BudgetTokens, minThinkingBudget)
	}
	switch r.Effort {
	case "none":
		return 0
	case "minimal":
		return minThinkingBudget
	case "low":
		return 2048
	case "", "medium":
		return 8192
	case "high":
		return 16384
	}
	return 32768 // xhigh, max
}

// messagesToWire renders the conversation. Tool results become user
// messages, consecutive messages of one role are merged (a run of OpenAI
// tool messages answers one assistant turn), and tool_result blocks go
// first in a user message, as Anthropic requires.
func messagesToWire(msgs []adapters.Message) ([]message, error) {
	var out []message
	ids := &toolIDs{}
	for _, m := range msgs {
		role := "user"
		var blocks []block
		var err error
		switch m.Role {
		case adapters.RoleUser, adapters.RoleTool:
			blocks, err = userBlocks(m.Parts, ids)
		case adapters.RoleAssistant:
			role = "assistant"
			blocks, err = assistantBlocks(m.Parts, ids)
		default:
			return nil, adapters.BadRequest("unknown message role %q", m.Role)
		}
		if err != nil {
			return nil, err
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content.Blocks = append(out[n-1].Content.Blocks, blocks...)
		} else {
			out = append(out, message{Role: role, Content: content{Blocks: blocks}})
		}
	}
	for i := range out {
		if out[i].Role == "user" {
			toolResultsFirst(out[i].Content.Blocks)
		}
	}
	return out, nil
}

func toolResultsFirst(blocks []block) {
	var results, rest []block
	for _, b := range blocks {
		if b.Type == "tool_result" {
			results = append(results, b)
		} else {
			rest = append(rest, b)
		}
	}
	copy(blocks, append(results, rest...))
}

// toolIDs keeps tool call ids valid for Anthropic (letters, digits, _ and -)
// and gives calls without an id one, which the next result without an id
// takes.
type toolIDs struct {
	clean   map[string]string
	made    int
	pending []string // generated ids not yet answered
}

func (t *toolIDs) call(id string) string {
	if id == "" {
		t.made++
		id = "toolu_gw" + strconv.Itoa(t.made)
		t.pending = append(t.pending, id)
		return id
	}
	return t.get(id)
}

func (t *toolIDs) result(id string) string {
	if id == "" {
		if len(t.pending) == 0 {
			return "toolu_gw0"
		}
		id, t.pending = t.pending[0], t.pending[1:]
		return id
	}
	return t.get(id)
}

func (t *toolIDs) get(id string) string {
	if v, ok := t.clean[id]; ok {
		return v
	}
	clean := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, id)
	if t.clean == nil {
		t.clean = map[string]string{}
	}
	t.clean[id] = clean
	return clean
}

func userBlocks(parts []adapters.Part, ids *toolIDs) ([]block, error) {
	var out []block
	for _, p := range parts {
		switch p.Type {
		case adapters.PartText:
			if p.Text != "" {
				out = append(out, block{Type: "text", Text: p.Text})
			}
		case adapters.PartImage:
			b, err := imageBlock(p.Image)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		case adapters.PartToolResult:
			r := p.ToolResult
			b := block{Type: "tool_result", ToolUseID: ids.result(r.CallID), IsError: r.IsError}
			var blocks []block
			for _, rp := range r.Content {
				switch rp.Type {
				case adapters.PartText:
					if rp.Text != "" {
						blocks = append(blocks, block{Type: "text", Text: rp.Text})
					}
				case adapters.PartImage:
					ib, err := imageBlock(rp.Image)
					if err != nil {
						return nil, err
					}
					blocks = append(blocks, ib)
				default:
					return nil, adapters.Unsupported("a tool result with %s content cannot be sent to an Anthropic channel", rp.Type)
				}
			}
			if len(blocks) > 0 {
				b.Content = &content{Blocks: blocks}
			}
			out = append(out, b)
		default:
			return nil, adapters.Unsupported("content of type %q cannot be sent to an Anthropic channel", p.Type)
		}
	}
	return out, nil
}

func assistantBlocks(parts []adapters.Part, ids *toolIDs) ([]block, error) {
	var out []block
	for _, p := range parts {
		switch p.Type {
		case adapters.PartText:
			if p.Text != "" {
				out = append(out, block{Type: "text", Text: p.Text})
			}
		case adapters.PartThinking:
			if p.Redacted != "" {
				out = append(out, block{Type: "redacted_thinking", Data: p.Redacted})
				continue
			}
			// Anthropic takes back only thinking it signed itself; other
			// vendors' reasoning is left out of the history.
			sig, ok := adapters.UntagSignature(Name, p.Signature)
			if !ok {
				continue
			}
			text := p.Text
			out = append(out, block{Type: "thinking", Thinking: &text, Signature: &sig})
		case adapters.PartToolCall:
			tc := p.ToolCall
			input, err := argumentsObject(tc.Arguments)
			if err != nil {
				return nil, adapters.BadRequest("the arguments of tool call %q (%s) are not a JSON object, so they cannot be sent to an Anthropic channel", tc.ID, tc.Name)
			}
			out = append(out, block{Type: "tool_use", ID: ids.call(tc.ID), Name: tc.Name, Input: input})
		default:
			return nil, adapters.Unsupported("an assistant message with %s content cannot be sent to an Anthropic channel", p.Type)
		}
	}
	return out, nil
}

// argumentsObject is a tool call's arguments as a JSON object; empty
// arguments are {}.
func argumentsObject(args string) (json.RawMessage, error) {
	a := bytes.TrimSpace([]byte(args))
	if len(a) == 0 {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(a, &obj); err != nil || obj == nil {
		return nil, adapters.BadRequest("not an object")
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, a)
	return buf.Bytes(), nil
}

// imageTypes are the media types Anthropic takes inline.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

func imageBlock(img *adapters.Image) (block, error) {
	if img == nil {
		return block{}, adapters.BadRequest("an image part has no image")
	}
	if img.URL != "" {
		return block{Type: "image", Source: &source{Type: "url", URL: img.URL}}, nil
	}
	mt := strings.ToLower(img.MediaType)
	if mt == "image/jpg" {
		mt = "image/jpeg"
	}
	if !imageTypes[mt] {
		return block{}, adapters.Unsupported("an image of type %q cannot be sent to an Anthropic channel: it takes image/jpeg, image/png, image/gif and image/webp", img.MediaType)
	}
	return block{Type: "image", Source: &source{Type: "base64", MediaType: mt, Data: base64.StdEncoding.EncodeToString(img.Data)}}, nil
}
