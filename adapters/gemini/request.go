package gemini

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// fetchImage downloads image URLs for Gemini, which takes images inline.
// A variable so tests need no network.
var fetchImage = adapters.FetchImage

// skipSignature is the placeholder Gemini documents for a function call in
// a history that did not come from Gemini, which has no thought signature
// of its own.
const skipSignature = "skip_thought_signature_validator"

// foreignPrefix marks, inside a thoughtSignature shown to a Gemini client, a
// signature another vendor issued, so it can be recognised when it comes back.
const foreignPrefix = "caddy-model-gateway:"

// signatureFromWire turns a thoughtSignature into its neutral, tagged form.
func signatureFromWire(b64 string) string {
	if b64 == "" {
		return ""
	}
	if raw, err := decodeBase64(b64); err == nil && bytes.HasPrefix(raw, []byte(foreignPrefix)) {
		return string(raw[len(foreignPrefix):])
	}
	return adapters.TagSignature(Name, b64)
}

// signatureToClient renders a neutral signature for a Gemini client: its
// own as it was, another vendor's wrapped so it comes back recognisable.
func signatureToClient(sig string) string {
	if sig == "" {
		return ""
	}
	if s, ok := adapters.UntagSignature(Name, sig); ok {
		return s
	}
	return base64.StdEncoding.EncodeToString([]byte(foreignPrefix + sig))
}

// DefaultThinkingBudget maps effort words to Gemini's thinkingBudget.
func thinkingBudget(r *adapters.Reasoning) (int64, bool) {
	if r.BudgetTokens > 0 {
		return r.BudgetTokens, true
	}
	switch r.Effort {
	case "none":
		return 0, true
	case "minimal":
		return 512, true
	case "low":
		return 1024, true
	case "", "medium":
		return 8192, true
	case "high":
		return 24576, true
	}
	return 32768, true // xhigh, max
}

// EncodeRequest renders a neutral chat as a generateContent body. Image
// URLs are fetched, since Gemini takes images inline; what Gemini cannot
// take is refused with a 400.
func EncodeRequest(ctx context.Context, req *adapters.Request) ([]byte, error) {
	w, err := requestToWire(ctx, req, true)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// EncodeCountTokensRequest renders a neutral chat as a countTokens body,
// with the system instruction and tools, which count too.
func EncodeCountTokensRequest(ctx context.Context, req *adapters.Request, model string) ([]byte, error) {
	w, err := requestToWire(ctx, req, false)
	if err != nil {
		return nil, err
	}
	w.Model = "models/" + model
	return json.Marshal(countTokensRequest{GenerateContentRequest: w})
}

func requestToWire(ctx context.Context, req *adapters.Request, generate bool) (*generateRequest, error) {
	c := req.Chat
	if c == nil {
		return nil, adapters.BadRequest("the request has no conversation to send")
	}
	w := &generateRequest{}
	if generate {
		g, err := generationToWire(c, req.OutputAllowance)
		if err != nil {
			return nil, err
		}
		w.GenerationConfig = g
	}
	// instructions given mid-conversation join the others: the vendor
	// takes them in one place
	system, turns := c.HoistSystem()
	for _, p := range system {
		if p.Type != adapters.PartText {
			return nil, adapters.Unsupported("a system prompt with %s content cannot be sent to a Gemini channel", p.Type)
		}
		if w.SystemInstruction == nil {
			w.SystemInstruction = &content{}
		}
		text := p.Text
		w.SystemInstruction.Parts = append(w.SystemInstruction.Parts, part{Text: &text})
	}
	var decls []functionDeclaration
	for _, t := range c.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, adapters.Unsupported("tool %q of type %q cannot be sent to a Gemini channel: only function tools translate", t.Name, t.Type)
		}
		fd := functionDeclaration{Name: t.Name, Description: t.Description}
		if len(bytes.TrimSpace(t.Parameters)) > 0 && !bytes.Equal(bytes.TrimSpace(t.Parameters), []byte("null")) {
			fd.ParametersJSONSchema = t.Parameters
		}
		decls = append(decls, fd)
	}
	if len(decls) > 0 {
		w.Tools = []tool{{FunctionDeclarations: decls}}
		if tc := c.ToolChoice; tc != nil {
			fc := &functionCallingConfig{Mode: "AUTO"}
			switch tc.Mode {
			case adapters.ToolChoiceNone:
				fc.Mode = "NONE"
			case adapters.ToolChoiceRequired:
				fc.Mode = "ANY"
			case adapters.ToolChoiceTool:
				fc.Mode, fc.AllowedFunctionNames = "ANY", []string{tc.Name}
			}
			w.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
		}
	}
	contents, err := contentsToWire(ctx, turns)
	if err != nil {
		return nil, err
	}
	if len(contents) == 0 {
		return nil, adapters.BadRequest("the conversation has no message with content to send")
	}
	w.Contents = contents
	return w, nil
}

func generationToWire(c *adapters.ChatRequest, allowance int64) (*generationConfig, error) {
	if c.N != nil && *c.N > 1 {
		return nil, adapters.Unsupported("'n' = %d cannot be sent to a Gemini channel through the gateway: it returns one answer per request", *c.N)
	}
	g := &generationConfig{
		MaxOutputTokens:  c.MaxTokens,
		Temperature:      c.Temperature,
		TopP:             c.TopP,
		StopSequences:    c.Stop,
		Seed:             c.Seed,
		PresencePenalty:  c.PresencePenalty,
		FrequencyPenalty: c.FrequencyPenalty,
	}
	if g.MaxOutputTokens == nil && allowance > 0 {
		g.MaxOutputTokens = &allowance
	}
	if c.TopK != nil {
		k := float64(*c.TopK)
		g.TopK = &k
	}
	if rf := c.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			g.ResponseMimeType = "application/json"
		case "json_schema":
			g.ResponseMimeType = "application/json"
			g.ResponseJSONSchema = rf.Schema
		case "text", "":
		default:
			return nil, adapters.Unsupported("response format %q cannot be sent to a Gemini channel", rf.Type)
		}
	}
	if r := c.Reasoning; r != nil {
		if budget, ok := thinkingBudget(r); ok {
			g.ThinkingConfig = &thinkingConfig{ThinkingBudget: &budget, IncludeThoughts: budget != 0}
		}
	}
	if b, _ := json.Marshal(g); string(b) == "{}" {
		return nil, nil
	}
	return g, nil
}

// contentsToWire renders the conversation: tool results go in user turns,
// consecutive turns of one role are merged (Gemini wants every response to
// a turn's calls together), and thought signatures go back on the part
// after the thinking that carried them.
func contentsToWire(ctx context.Context, msgs []adapters.Message) ([]content, error) {
	var out []content
	for _, m := range msgs {
		role := "user"
		var parts []part
		var err error
		switch m.Role {
		case adapters.RoleUser, adapters.RoleTool:
			parts, err = userPartsToWire(ctx, m.Parts)
		case adapters.RoleAssistant:
			role = "model"
			parts, err = modelPartsToWire(m.Parts)
		default:
			return nil, adapters.BadRequest("unknown message role %q", m.Role)
		}
		if err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
		} else {
			out = append(out, content{Role: role, Parts: parts})
		}
	}
	return out, nil
}

func userPartsToWire(ctx context.Context, parts []adapters.Part) ([]part, error) {
	var out []part
	for _, p := range parts {
		switch p.Type {
		case adapters.PartText:
			if p.Text != "" {
				text := p.Text
				out = append(out, part{Text: &text})
			}
		case adapters.PartImage:
			ip, err := imagePart(ctx, p.Image)
			if err != nil {
				return nil, err
			}
			out = append(out, ip)
		case adapters.PartToolResult:
			r := p.ToolResult
			if r.Name == "" {
				return nil, adapters.BadRequest("the result of tool call %q names no function, which a Gemini channel needs: send the assistant message with that call earlier in the conversation", r.CallID)
			}
			var text strings.Builder
			var images []part
			for _, rp := range r.Content {
				switch rp.Type {
				case adapters.PartText:
					text.WriteString(rp.Text)
				case adapters.PartImage:
					ip, err := imagePart(ctx, rp.Image)
					if err != nil {
						return nil, err
					}
					images = append(images, ip)
				default:
					return nil, adapters.Unsupported("a tool result with %s content cannot be sent to a Gemini channel", rp.Type)
				}
			}
			out = append(out, part{FunctionResponse: &functionResponse{ID: r.CallID, Name: r.Name, Response: responseObject(text.String(), r.IsError)}})
			out = append(out, images...) // Gemini reads images beside the response
		default:
			return nil, adapters.Unsupported("content of type %q cannot be sent to a Gemini channel", p.Type)
		}
	}
	return out, nil
}

// responseObject wraps a tool's output as Gemini's documentation asks:
// {"output": ...} or {"error": ...}, JSON objects and arrays kept as JSON.
func responseObject(text string, isError bool) json.RawMessage {
	key := "output"
	if isError {
		key = "error"
	}
	var v json.RawMessage
	t := bytes.TrimSpace([]byte(text))
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		v = t
	} else {
		v, _ = json.Marshal(text)
	}
	k, _ := json.Marshal(key)
	return json.RawMessage(`{` + string(k) + `:` + string(v) + `}`)
}

func modelPartsToWire(parts []adapters.Part) ([]part, error) {
	var out []part
	pending := "" // a signature waiting for the part it belongs on
	sawCall := false
	for _, p := range parts {
		switch p.Type {
		case adapters.PartThinking:
			sig, ok := adapters.UntagSignature(Name, p.Signature)
			if !ok {
				continue // other vendors' reasoning is left out of the history
			}
			if p.Text != "" {
				text := p.Text
				out = append(out, part{Text: &text, Thought: true, ThoughtSignature: sig})
				continue
			}
			pending = sig
		case adapters.PartText:
			if p.Text == "" {
				continue
			}
			text := p.Text
			out = append(out, part{Text: &text, ThoughtSignature: pending})
			pending = ""
		case adapters.PartToolCall:
			tc := p.ToolCall
			args, err := argsObject(tc.Arguments)
			if err != nil {
				return nil, adapters.BadRequest("the arguments of tool call %q (%s) are not a JSON object, so they cannot be sent to a Gemini channel", tc.ID, tc.Name)
			}
			sig := pending
			if sig == "" && !sawCall {
				sig = skipSignature
			}
			pending, sawCall = "", true
			out = append(out, part{FunctionCall: &functionCall{ID: tc.ID, Name: tc.Name, Args: args}, ThoughtSignature: sig})
		default:
			return nil, adapters.Unsupported("an assistant message with %s content cannot be sent to a Gemini channel", p.Type)
		}
	}
	if pending != "" {
		if n := len(out); n > 0 && out[n-1].ThoughtSignature == "" {
			out[n-1].ThoughtSignature = pending
		} else {
			empty := ""
			out = append(out, part{Text: &empty, ThoughtSignature: pending})
		}
	}
	return out, nil
}

// argsObject is a tool call's arguments as a JSON object; empty is {}.
func argsObject(args string) (json.RawMessage, error) {
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

func imagePart(ctx context.Context, img *adapters.Image) (part, error) {
	if img == nil {
		return part{}, adapters.BadRequest("an image part has no image")
	}
	if img.URL != "" {
		fetched, err := fetchImage(ctx, img.URL)
		if err != nil {
			return part{}, err
		}
		img = fetched
	}
	return part{InlineData: &blob{MimeType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)}}, nil
}
