package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// DecodeRequest implements adapters.Dialect. The model and whether to
// stream come from the path.
func (Adapter) DecodeRequest(op adapters.Operation, body []byte, r *http.Request) (*adapters.Request, error) {
	req := &adapters.Request{Op: op, Dialect: Name, Raw: body, IncludeUsage: true}
	if r != nil {
		req.Header = r.Header
	}
	model, method := pathModel(r)
	req.Model = strings.TrimPrefix(model, "models/")
	switch op {
	case adapters.OpListModels, adapters.OpGetModel:
		return req, nil
	case adapters.OpChat, adapters.OpCountTokens:
	default:
		return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "this method is not supported by the gateway")
	}
	if req.Model == "" {
		return nil, adapters.BadRequest("the model is missing from the path: call /v1beta/models/{model}:generateContent, for example /v1beta/models/gemini-2.5-flash:generateContent")
	}
	req.Stream = op == adapters.OpChat && method == "streamGenerateContent"
	body = camelCase(body)
	var w generateRequest
	if op == adapters.OpCountTokens {
		var c countTokensRequest
		if err := adapters.DecodeJSON(body, &c); err != nil {
			return nil, err
		}
		if c.GenerateContentRequest != nil {
			w = *c.GenerateContentRequest
		} else {
			w.Contents = c.Contents
		}
	} else if err := adapters.DecodeJSON(body, &w); err != nil {
		return nil, err
	}
	if len(w.Contents) == 0 {
		return nil, adapters.BadRequest("'contents' must be a non-empty array of {\"role\",\"parts\"} contents")
	}
	chat, err := requestToNeutral(&w)
	if err != nil {
		return nil, err
	}
	req.Chat = chat
	return req, nil
}

func requestToNeutral(w *generateRequest) (*adapters.ChatRequest, error) {
	c := &adapters.ChatRequest{}
	if si := w.SystemInstruction; si != nil {
		for i, p := range si.Parts {
			if p.Text == nil {
				return nil, adapters.BadRequest("'systemInstruction.parts[%d]' must be a text part", i)
			}
			c.System = append(c.System, adapters.Part{Type: adapters.PartText, Text: *p.Text})
		}
	}
	if g := w.GenerationConfig; g != nil {
		if err := generationToNeutral(g, c); err != nil {
			return nil, err
		}
	}
	allowed := map[string]bool{}
	if tc := w.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		fc := tc.FunctionCallingConfig
		switch strings.ToUpper(fc.Mode) {
		case "", "AUTO", "MODE_UNSPECIFIED", "VALIDATED":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceAuto}
		case "NONE":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceNone}
		case "ANY":
			c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceRequired}
			if len(fc.AllowedFunctionNames) == 1 {
				c.ToolChoice = &adapters.ToolChoice{Mode: adapters.ToolChoiceTool, Name: fc.AllowedFunctionNames[0]}
			}
			for _, n := range fc.AllowedFunctionNames {
				allowed[n] = true
			}
		default:
			return nil, adapters.BadRequest("'toolConfig.functionCallingConfig.mode' must be AUTO, ANY, NONE or VALIDATED, got %q", fc.Mode)
		}
	}
	for i, t := range w.Tools {
		for _, name := range t.Builtin {
			c.Tools = append(c.Tools, adapters.Tool{Type: name, Name: name})
		}
		for j, fd := range t.FunctionDeclarations {
			if fd.Name == "" {
				return nil, adapters.BadRequest("'tools[%d].functionDeclarations[%d].name' is required", i, j)
			}
			if len(allowed) > 0 && !allowed[fd.Name] {
				continue // ANY mode limited to some functions: offer only those
			}
			params := fd.ParametersJSONSchema
			if len(params) == 0 && len(fd.Parameters) > 0 {
				params = jsonSchema(fd.Parameters)
			}
			c.Tools = append(c.Tools, adapters.Tool{Type: "function", Name: fd.Name, Description: fd.Description, Parameters: params})
		}
	}
	ids := &callIDs{}
	for i, ct := range w.Contents {
		role := adapters.RoleUser
		switch ct.Role {
		case "", "user", "function", "tool":
		case "model":
			role = adapters.RoleAssistant
		default:
			return nil, adapters.BadRequest("'contents[%d].role' must be \"user\" or \"model\", got %q", i, ct.Role)
		}
		parts, err := partsToNeutral(ct.Parts, role, i, ids)
		if err != nil {
			return nil, err
		}
		if role == adapters.RoleUser && onlyToolResults(parts) {
			role = adapters.RoleTool
		}
		c.Messages = append(c.Messages, adapters.Message{Role: role, Parts: parts})
	}
	if w.CachedContent != "" {
		// cached content is part of the prompt that only Gemini holds: it
		// travels as a part of its own, which a translation refuses
		cached := adapters.Part{Type: "cachedContent"}
		if c.Messages[0].Role == adapters.RoleUser {
			c.Messages[0].Parts = append([]adapters.Part{cached}, c.Messages[0].Parts...)
		} else {
			c.Messages = append([]adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{cached}}}, c.Messages...)
		}
	}
	return c, nil
}

func generationToNeutral(g *generationConfig, c *adapters.ChatRequest) error {
	c.MaxTokens, c.Temperature, c.TopP, c.Stop = g.MaxOutputTokens, g.Temperature, g.TopP, g.StopSequences
	c.N, c.Seed, c.PresencePenalty, c.FrequencyPenalty = g.CandidateCount, g.Seed, g.PresencePenalty, g.FrequencyPenalty
	if g.TopK != nil {
		k := int64(*g.TopK)
		c.TopK = &k
	}
	switch mt := strings.ToLower(g.ResponseMimeType); {
	case mt == "application/json":
		switch {
		case len(g.ResponseJSONSchema) > 0:
			c.ResponseFormat = &adapters.ResponseFormat{Type: "json_schema", Schema: g.ResponseJSONSchema}
		case len(g.ResponseSchema) > 0:
			c.ResponseFormat = &adapters.ResponseFormat{Type: "json_schema", Schema: jsonSchema(g.ResponseSchema)}
		default:
			c.ResponseFormat = &adapters.ResponseFormat{Type: "json_object"}
		}
	case mt == "" || mt == "text/plain":
	default:
		// text/x.enum and the like: only a Gemini upstream can honour it
		c.ResponseFormat = &adapters.ResponseFormat{Type: mt, Schema: g.ResponseSchema}
	}
	if tc := g.ThinkingConfig; tc != nil {
		switch {
		case tc.ThinkingLevel != "" && !strings.EqualFold(tc.ThinkingLevel, "THINKING_LEVEL_UNSPECIFIED"):
			c.Reasoning = &adapters.Reasoning{Effort: strings.ToLower(tc.ThinkingLevel)}
		case tc.ThinkingBudget == nil:
		case *tc.ThinkingBudget < 0:
			c.Reasoning = &adapters.Reasoning{Effort: "medium"} // dynamic: the model decides
		case *tc.ThinkingBudget > 0:
			c.Reasoning = &adapters.Reasoning{BudgetTokens: *tc.ThinkingBudget}
		}
	}
	return nil
}

func onlyToolResults(parts []adapters.Part) bool {
	for _, p := range parts {
		if p.Type != adapters.PartToolResult {
			return false
		}
	}
	return len(parts) > 0
}

// callIDs pairs function calls and responses that carry no id, as Gemini's
// clients usually send them: a call gets an id from its position, and a
// response takes the oldest unanswered call of its name.
type callIDs struct {
	open []adapters.ToolCall
	// generate makes ids for calls in an upstream's answer; nil in requests
	generate func() string
}

func (c *callIDs) call(id, name string, content, part int) string {
	if id == "" {
		if c.generate != nil {
			id = c.generate()
		} else {
			id = "call_" + strconv.Itoa(content) + "_" + strconv.Itoa(part)
		}
	}
	c.open = append(c.open, adapters.ToolCall{ID: id, Name: name})
	return id
}

func (c *callIDs) result(id, name string) string {
	for i, o := range c.open {
		if (id != "" && o.ID == id) || (id == "" && o.Name == name) {
			c.open = append(c.open[:i:i], c.open[i+1:]...)
			return o.ID
		}
	}
	if id == "" {
		return "call_" + name
	}
	return id
}

// partsToNeutral reads one content's parts. A thought signature becomes a
// thinking part of its own, before the part that carried it, so that it
// survives a trip through a client of another family.
func partsToNeutral(parts []part, role string, ci int, ids *callIDs) ([]adapters.Part, error) {
	var out []adapters.Part
	for j, p := range parts {
		at := "contents[" + strconv.Itoa(ci) + "].parts[" + strconv.Itoa(j) + "]"
		sig := signatureFromWire(p.ThoughtSignature)
		switch {
		case p.Text != nil && p.Thought:
			out = append(out, adapters.Part{Type: adapters.PartThinking, Text: *p.Text, Signature: sig})
			continue
		case sig != "":
			out = append(out, adapters.Part{Type: adapters.PartThinking, Signature: sig})
		}
		switch {
		case p.Text != nil:
			if *p.Text != "" || role != adapters.RoleAssistant {
				out = append(out, adapters.Part{Type: adapters.PartText, Text: *p.Text})
			}
		case p.InlineData != nil:
			d := p.InlineData
			mt := strings.ToLower(d.MimeType)
			if !strings.HasPrefix(mt, "image/") {
				out = append(out, adapters.Part{Type: mediaKind(mt)})
				continue
			}
			data, err := decodeBase64(d.Data)
			if err != nil {
				return nil, adapters.BadRequest("'%s.inlineData.data' is not valid base64: %v", at, err)
			}
			out = append(out, adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{MediaType: mt, Data: data}})
		case p.FileData != nil:
			f := p.FileData
			if strings.HasPrefix(strings.ToLower(f.MimeType), "image/") && isPublicURL(f.FileURI) {
				out = append(out, adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{URL: f.FileURI, MediaType: f.MimeType}})
			} else {
				out = append(out, adapters.Part{Type: "file"}) // Files API, gs:// and video URIs only Gemini resolves
			}
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			if fc.Name == "" {
				return nil, adapters.BadRequest("'%s.functionCall.name' is required", at)
			}
			id := ids.call(fc.ID, fc.Name, ci, j)
			out = append(out, adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: id, Name: fc.Name, Arguments: argsText(fc.Args)}})
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			if fr.Name == "" {
				return nil, adapters.BadRequest("'%s.functionResponse.name' is required", at)
			}
			text, isErr := responseText(fr.Response)
			r := &adapters.ToolResult{CallID: ids.result(fr.ID, fr.Name), Name: fr.Name, IsError: isErr}
			if text != "" {
				r.Content = []adapters.Part{{Type: adapters.PartText, Text: text}}
			}
			out = append(out, adapters.Part{Type: adapters.PartToolResult, ToolResult: r})
		case p.ExecutableCode != nil:
			out = append(out, adapters.Part{Type: "executableCode"})
		case p.CodeExecutionResult != nil:
			out = append(out, adapters.Part{Type: "codeExecutionResult"})
		case sig != "":
			// a part that only carries a signature
		case p.empty():
			// {} : what a client sends back of the API's last, empty chunk
		default:
			// a kind of part the gateway does not know: kept so that a
			// Gemini upstream gets it and a translation refuses it
			out = append(out, adapters.Part{Type: "gemini part of another kind"})
		}
	}
	return out, nil
}

// mediaKind names non-image inline data for a refusal.
func mediaKind(mt string) adapters.PartType {
	switch {
	case strings.HasPrefix(mt, "audio/"):
		return "audio"
	case strings.HasPrefix(mt, "video/"):
		return "video"
	case mt == "application/pdf":
		return "document"
	}
	return "file"
}

// isPublicURL tells an ordinary http(s) image URL from a Files API URI,
// which needs Google credentials to read.
func isPublicURL(u string) bool {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return false
	}
	return !strings.Contains(u, "generativelanguage.googleapis.com/") && !strings.Contains(u, "youtube.com/") && !strings.Contains(u, "youtu.be/")
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return nil, err
}

// argsText is a function call's args as JSON object text.
func argsText(raw json.RawMessage) string {
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

// responseText reads a functionResponse.response: {"output": x} and
// {"error": x}, as Gemini's documentation asks, give x (a string as it is);
// anything else is given whole as JSON.
func responseText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil && len(m) == 1 {
		for k, v := range m {
			if k == "output" || k == "result" || k == "error" {
				return jsonValueText(v), k == "error"
			}
		}
	}
	return jsonValueText(raw), false
}

func jsonValueText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return string(v)
	}
	return buf.String()
}

// jsonSchema turns Gemini's OpenAPI-style Schema (types in capitals,
// nullable, propertyOrdering) into the JSON Schema other vendors take.
func jsonSchema(raw json.RawMessage) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(schemaNode(v))
	if err != nil {
		return raw
	}
	return out
}

func schemaNode(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if t, ok := m["type"].(string); ok {
		m["type"] = strings.ToLower(t)
		if t == "TYPE_UNSPECIFIED" {
			delete(m, "type")
		}
	}
	if n, ok := m["nullable"].(bool); ok {
		delete(m, "nullable")
		if t, ok := m["type"].(string); ok && n {
			m["type"] = []any{t, "null"}
		}
	}
	delete(m, "propertyOrdering")
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			props[k] = schemaNode(p)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := m[k]; ok {
			m[k] = schemaNode(sub)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := m[k].([]any); ok {
			for i := range list {
				list[i] = schemaNode(list[i])
			}
		}
	}
	return m
}
