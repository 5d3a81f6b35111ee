package openai

import (
	"github.com/caddy-model-gateway/gateway/adapters"
)

// decodeChat decodes a chat request body into w. Every chat request passes
// here, and encoding/json's reflection costs several microseconds for even
// a short one, so the common shapes are read by hand: readChat fills w
// exactly as json.Unmarshal would, or gives up at the first thing it does
// not read exactly as encoding/json would (an escaped or case-folded key,
// a repeated key, a type encoding/json refuses, a field it does not know),
// and json.Unmarshal decodes the body instead, with its own errors.
// The reader checks the syntax as it goes (json.Valid's pass was a
// third of the hand-read decode's time): a body that is not valid JSON
// is never taken from it, so every error is still worded by encoding/json.
func decodeChat(body []byte, w *chatRequest) error {
	r := jsonReader{b: body, ok: true}
	if r.chat(w); r.ok && r.next() == 0 && r.i == len(body) {
		return nil
	}
	*w = chatRequest{}
	return adapters.DecodeJSON(body, w)
}

var (
	chatKeys = []string{"model", "messages", "stream", "stream_options", "tools", "tool_choice",
		"parallel_tool_calls", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
		"n", "seed", "presence_penalty", "frequency_penalty", "response_format", "reasoning_effort",
		"user", "prompt_cache_key"}
	messageKeys        = []string{"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "reasoning_content", "annotations", "reasoning"}
	partKeys           = []string{"type", "text", "image_url", "refusal"}
	imageURLKeys       = []string{"url", "detail"}
	toolCallKeys       = []string{"index", "id", "type", "function"}
	functionCallKeys   = []string{"name", "arguments"}
	toolKeys           = []string{"type", "function"}
	functionDefKeys    = []string{"name", "description", "parameters", "strict"}
	streamOptionsKeys  = []string{"include_usage"}
	responseFormatKeys = []string{"type", "json_schema"}
	jsonSchemaKeys     = []string{"name", "schema", "strict"}
)

// chat reads a chatRequest; its fields are in chatKeys' order.
func (r *jsonReader) chat(w *chatRequest) {
	r.object(chatKeys, func(k int) {
		switch k {
		case 0:
			r.str(&w.Model)
		case 1:
			w.Messages = nil
			if r.array(func() {
				w.Messages = append(w.Messages, chatMessage{})
				r.message(&w.Messages[len(w.Messages)-1])
			}) && w.Messages == nil {
				w.Messages = []chatMessage{}
			}
		case 2:
			r.boolean(&w.Stream)
		case 3:
			if r.null() {
				w.StreamOptions = nil
				return
			}
			w.StreamOptions = &streamOptions{}
			r.object(streamOptionsKeys, func(int) { r.boolean(&w.StreamOptions.IncludeUsage) })
		case 4:
			w.Tools = nil
			if r.array(func() {
				w.Tools = append(w.Tools, tool{})
				r.tool(&w.Tools[len(w.Tools)-1])
			}) && w.Tools == nil {
				w.Tools = []tool{}
			}
		case 5:
			r.raw(&w.ToolChoice)
		case 6:
			r.boolPtr(&w.ParallelToolCalls)
		case 7:
			r.int64Ptr(&w.MaxTokens)
		case 8:
			r.int64Ptr(&w.MaxCompletionTokens)
		case 9:
			r.float64Ptr(&w.Temperature)
		case 10:
			r.float64Ptr(&w.TopP)
		case 11:
			r.stringList(&w.Stop)
		case 12:
			r.int64Ptr(&w.N)
		case 13:
			r.int64Ptr(&w.Seed)
		case 14:
			r.float64Ptr(&w.PresencePenalty)
		case 15:
			r.float64Ptr(&w.FrequencyPenalty)
		case 16:
			r.responseFormat(&w.ResponseFormat)
		case 17:
			r.str(&w.ReasoningEffort)
		case 18:
			r.str(&w.User)
		case 19:
			r.str(&w.PromptCacheKey)
		}
	})
}

// stringList reads a string or an array of strings as
// stringList.UnmarshalJSON does; a null in the array ends the read.
func (r *jsonReader) stringList(s *stringList) {
	switch r.next() {
	case 'n':
		r.literal("null")
	case '"':
		var one string
		if r.str(&one); r.ok {
			*s = stringList{one}
		}
	case '[':
		many := stringList{}
		r.array(func() {
			if r.next() != '"' {
				r.fail()
				return
			}
			var v string
			r.str(&v)
			many = append(many, v)
		})
		*s = many
	default:
		r.fail()
	}
}

func (r *jsonReader) message(m *chatMessage) {
	if r.next() != '{' {
		r.fail() // null (a zero message) or another type
		return
	}
	r.object(messageKeys, func(k int) {
		switch k {
		case 0:
			r.text(&m.Role)
		case 1:
			r.content(&m.Content)
		case 2:
			r.text(&m.Name)
		case 3:
			m.ToolCalls = nil
			if r.array(func() {
				m.ToolCalls = append(m.ToolCalls, toolCall{})
				r.toolCall(&m.ToolCalls[len(m.ToolCalls)-1])
			}) && m.ToolCalls == nil {
				m.ToolCalls = []toolCall{}
			}
		case 4:
			r.text(&m.ToolCallID)
		case 5:
			r.textPtr(&m.Refusal)
		case 6:
			r.text(&m.Reasoning)
		case 7:
			r.raw(&m.Annotation)
		case 8:
			// looseString: a string is read, any other value ignored
			if r.next() == '"' {
				var s string
				r.text(&s)
				m.AltReasoning = looseString(s)
			} else {
				r.skip(0)
			}
		}
	})
}

// content reads a message's content as messageContent.UnmarshalJSON does.
func (r *jsonReader) content(c *messageContent) {
	switch r.next() {
	case 'n':
		r.literal("null")
	case '"':
		var s string
		if r.text(&s); r.ok {
			c.Text = &s
		}
	case '[':
		c.IsParts = true
		c.Parts = []contentPart{}
		r.array(func() {
			c.Parts = append(c.Parts, contentPart{})
			r.part(&c.Parts[len(c.Parts)-1])
		})
	default:
		r.fail() // refused by UnmarshalJSON, which words the error
	}
}

func (r *jsonReader) part(p *contentPart) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(partKeys, func(k int) {
		switch k {
		case 0:
			r.text(&p.Type)
		case 1:
			r.text(&p.Text)
		case 2:
			if r.null() {
				p.ImageURL = nil
				return
			}
			p.ImageURL = &imageURL{}
			r.object(imageURLKeys, func(k int) {
				if k == 0 {
					r.text(&p.ImageURL.URL)
				} else {
					r.text(&p.ImageURL.Detail)
				}
			})
		case 3:
			r.text(&p.Refusal)
		}
	})
}

func (r *jsonReader) toolCall(tc *toolCall) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(toolCallKeys, func(k int) {
		switch k {
		case 0:
			r.intPtr(&tc.Index)
		case 1:
			r.text(&tc.ID)
		case 2:
			r.text(&tc.Type)
		case 3:
			if r.null() {
				return
			}
			r.object(functionCallKeys, func(k int) {
				if k == 0 {
					r.text(&tc.Function.Name)
				} else {
					r.text(&tc.Function.Arguments)
				}
			})
		}
	})
}

func (r *jsonReader) tool(t *tool) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(toolKeys, func(k int) {
		switch k {
		case 0:
			r.str(&t.Type)
		case 1:
			if r.null() {
				return
			}
			f := &t.Function
			r.object(functionDefKeys, func(k int) {
				switch k {
				case 0:
					r.str(&f.Name)
				case 1:
					r.str(&f.Description)
				case 2:
					r.raw(&f.Parameters)
				case 3:
					r.boolPtr(&f.Strict)
				}
			})
		}
	})
}

func (r *jsonReader) responseFormat(p **responseFormat) {
	if r.null() {
		*p = nil
		return
	}
	rf := &responseFormat{}
	*p = rf
	r.object(responseFormatKeys, func(k int) {
		if k == 0 {
			r.str(&rf.Type)
			return
		}
		if r.null() {
			rf.JSONSchema = nil
			return
		}
		js := &jsonSchema{}
		rf.JSONSchema = js
		r.object(jsonSchemaKeys, func(k int) {
			switch k {
			case 0:
				r.str(&js.Name)
			case 1:
				r.raw(&js.Schema)
			case 2:
				r.boolPtr(&js.Strict)
			}
		})
	})
}
