package tracing

import (
	"encoding/json"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Message content is recorded only with trace_content, in the shape the
// GenAI conventions give gen_ai.input.messages and gen_ai.output.messages
// (a JSON array of {role, parts}), each attribute cut to the configured
// size. Images go as a part of type "image" with no data or URL: a data
// URL is megabytes and a URL may carry a signature. Keys are never in a
// message the gateway decoded: they travel in headers.

type part struct {
	Type      string `json:"type"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Response  string `json:"response,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// Input records the request's messages and system instructions.
func (r *Request) Input(req *adapters.Request) {
	if r == nil || r.content <= 0 || req == nil {
		return
	}
	var msgs []message
	switch {
	case req.Chat != nil:
		if len(req.Chat.System) > 0 {
			r.set(SystemMessages, parts(req.Chat.System))
		}
		for _, m := range req.Chat.Messages {
			msgs = append(msgs, message{Role: m.Role, Parts: parts(m.Parts)})
		}
	case req.Embedding != nil:
		ps := make([]part, 0, len(req.Embedding.Input))
		for _, s := range req.Embedding.Input {
			ps = append(ps, part{Type: "text", Content: s})
		}
		msgs = append(msgs, message{Role: adapters.RoleUser, Parts: ps})
	default:
		return
	}
	r.set(InputMessages, msgs)
}

// Observe takes what a trace says of a stream's event: the model it
// names, its finish reason, and its text while content is recorded.
func (r *Request) Observe(ev *adapters.StreamEvent) {
	switch ev.Type {
	case adapters.EventStart:
		r.ResponseModel(ev.Model)
	case adapters.EventFinish:
		r.FinishReason(string(ev.StopReason))
	case adapters.EventTextDelta:
		if r.content > 0 && len(r.text) <= r.content {
			r.text = append(r.text, ev.Text[:min(len(ev.Text), r.content+1-len(r.text))]...)
		}
	}
}

// streamOutput records a stream's answer, the text Observe kept.
func (r *Request) streamOutput() {
	if !r.output && len(r.text) > 0 {
		r.Output(nil, string(r.text))
	}
}

// Output records the answer: its message when the answer was whole, else
// the text relayed.
func (r *Request) Output(m *adapters.Message, text string) {
	if r == nil || r.content <= 0 {
		return
	}
	r.output = true
	out := message{Role: adapters.RoleAssistant, FinishReason: FinishReasonOf(r.finish)}
	if m != nil && len(m.Parts) > 0 {
		out.Parts = parts(m.Parts)
	} else if text != "" {
		out.Parts = []part{{Type: "text", Content: text}}
	} else {
		return
	}
	r.set(OutputMessages, []message{out})
}

// Recording says whether message content is recorded, so a caller keeps
// what Output needs only then.
func (r *Request) Recording() bool { return r != nil && r.content > 0 }

func parts(ps []adapters.Part) []part {
	out := make([]part, 0, len(ps))
	for _, p := range ps {
		switch p.Type {
		case adapters.PartText:
			out = append(out, part{Type: "text", Content: p.Text})
		case adapters.PartThinking:
			out = append(out, part{Type: "reasoning", Content: p.Text})
		case adapters.PartImage:
			out = append(out, part{Type: "image"})
		case adapters.PartToolCall:
			if p.ToolCall != nil {
				out = append(out, part{Type: "tool_call", ID: p.ToolCall.ID, Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments})
			}
		case adapters.PartToolResult:
			if p.ToolResult != nil {
				out = append(out, part{Type: "tool_call_response", ID: p.ToolResult.CallID, Response: toolText(p.ToolResult)})
			}
		}
	}
	return out
}

// set records v as JSON under key, cut to the configured size at a
// character's boundary (a cut value is no longer valid JSON, and says so
// with gateway.content_truncated).
func (r *Request) set(key attribute.Key, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	if len(b) > r.content {
		n := r.content
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
		r.span.SetAttributes(ContentCut.Bool(true))
	}
	r.span.SetAttributes(key.String(string(b)))
}

// toolText is a tool result's text parts, one after another.
func toolText(tr *adapters.ToolResult) string {
	var s string
	for _, p := range tr.Content {
		if p.Type == adapters.PartText {
			s += p.Text
		}
	}
	return s
}
