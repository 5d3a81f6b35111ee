package engine

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// Prompt-cache affinity in the request's life: planning names the
// conversation and puts the channel it is bound to first, an attempt on
// that channel uses the bound key, a failure of it moves the conversation,
// and the channel and key that answer become (or stay) its binding. See
// routing.Affinity and docs/prompt-cache.md.

// Pin is what a request knows of its conversation's binding.
type Pin struct {
	id    routing.ConversationID
	bound routing.Binding
	has   bool // bound is live and its channel leads the plan
	// key is the index of the key the latest attempt used
	key int
}

// Headers that name a conversation, after the request body's
// prompt_cache_key and before Anthropic's metadata.user_id.
const (
	headerClaudeCodeSession = "X-Claude-Code-Session-Id"
	headerCodexSession      = "Session_id" // Codex's session_id, canonical form
	headerSessionID         = "X-Session-Id"
)

// conversationID names the request's conversation within the caller's key,
// from the first of: OpenAI's prompt_cache_key, Claude Code's session
// header, Codex's session_id header, Anthropic's metadata.user_id, an
// X-Session-Id header, else the conversation's stable start (tools, system
// prompt, first user message). ok is false for a request that has none
// (no first user message), which then goes by rotation.
func conversationID(x *Exchange) (id routing.ConversationID, ok bool) {
	c := x.Req.Chat
	if c == nil {
		return id, false
	}
	h := newIDHash()
	var tokenID int64
	if x.ID != nil && x.ID.Token != nil {
		tokenID = x.ID.Token.ID
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(tokenID))
	h.write(n[:])
	named := func(kind byte, name string) bool {
		if name == "" {
			return false
		}
		h.write([]byte{kind})
		h.field(name)
		return true
	}
	hdr := x.R.Header
	switch {
	case named('k', c.CacheKey):
	case named('c', hdr.Get(headerClaudeCodeSession)):
	case named('x', hdr.Get(headerCodexSession)):
	case named('u', c.Session):
	case named('s', hdr.Get(headerSessionID)):
	default:
		h.write([]byte{'p'})
		if !writeStart(h, c) {
			return id, false
		}
	}
	return h.sum(), true
}

// idSeeds key the conversation hash: two 64-bit hashes under seeds of the
// process's own, so no caller can aim at another's conversation id, and
// hashing a long prompt copies nothing.
var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

type idHash struct{ a, b maphash.Hash }

func newIDHash() *idHash {
	h := &idHash{}
	h.a.SetSeed(idSeeds[0])
	h.b.SetSeed(idSeeds[1])
	return h
}

func (h *idHash) write(p []byte) {
	h.a.Write(p)
	h.b.Write(p)
}

// field writes s with its length first, so fields cannot run into each
// other.
func (h *idHash) field(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.write(n[:])
	h.a.WriteString(s)
	h.b.WriteString(s)
}

func (h *idHash) fieldBytes(p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.write(n[:])
	h.write(p)
}

func (h *idHash) sum() (id routing.ConversationID) {
	binary.BigEndian.PutUint64(id[:8], h.a.Sum64())
	binary.BigEndian.PutUint64(id[8:], h.b.Sum64())
	return id
}

// writeStart hashes what stays the same over a conversation's turns: its
// tools, system prompt and first user message. It reports false when there
// is no user message to anchor it.
func writeStart(h *idHash, c *adapters.ChatRequest) bool {
	first := slices.IndexFunc(c.Messages, func(m adapters.Message) bool { return m.Role == adapters.RoleUser })
	if first < 0 {
		return false
	}
	for _, t := range c.Tools {
		h.field(t.Type)
		h.field(t.Name)
		h.field(t.Description)
		h.fieldBytes(t.Parameters)
	}
	h.write([]byte{0})
	writeParts(h, c.System)
	h.write([]byte{0})
	writeParts(h, c.Messages[first].Parts)
	return true
}

func writeParts(h *idHash, parts []adapters.Part) {
	for _, p := range parts {
		h.field(string(p.Type))
		h.field(p.Text)
		if p.Image != nil {
			h.field(p.Image.URL)
			h.fieldBytes(p.Image.Data)
		}
		if p.ToolResult != nil {
			h.field(p.ToolResult.CallID)
		}
	}
}

// planPinned is Plan for a conversation: when the conversation is bound
// to a channel that the plan still holds (healthy, serving the model and
// the request's operation) with its key still configured, that channel
// goes first; otherwise the binding is dropped and the move counted.
// Affinity chooses among the channels of the plan's first priority only:
// a conversation that failed over to a backup goes back to the channel the
// operator prefers once that serves again.
func (e *Engine) planPinned(x *Exchange, keep func(*routing.Channel) bool) []*routing.Channel {
	model := x.Req.Model
	if e.Affinity == nil || !x.Req.Op.Conversation() {
		return e.Plan(model, keep)
	}
	id, ok := conversationID(x)
	if !ok {
		return e.Plan(model, keep)
	}
	x.Pin = &Pin{id: id, key: -1}
	b, bound := e.Affinity.Lookup(id)
	plan := e.Channels.PlanFor(model, math.MaxInt, keep)
	if bound {
		i := slices.IndexFunc(plan, func(ch *routing.Channel) bool { return ch.Name == b.Channel })
		reason := ""
		switch {
		case i < 0:
			reason = routing.MoveUnavailable
			if ch := e.Channels.Channel(b.Channel); ch != nil && ch.Ejected(time.Now()) {
				reason = routing.MoveEjected
			}
		case plan[i].Priority < plan[0].Priority:
			reason = routing.MovePriority
		default:
			if _, ok := plan[i].BoundKey(b); !ok {
				reason = routing.MoveKeyRemoved
				break
			}
			ch := plan[i]
			copy(plan[1:i+1], plan[:i])
			plan[0] = ch
			x.Pin.bound, x.Pin.has = b, true
		}
		if reason != "" {
			e.Affinity.Forget(id)
			e.Affinity.Moved(reason)
		}
	}
	if len(plan) > e.MaxAttempts {
		plan = plan[:e.MaxAttempts]
	}
	return plan
}

// upstreamKey is the key an attempt on ch sends: the bound key on the
// bound channel, else the channel's next by rotation.
func (x *Exchange) upstreamKey(ch *routing.Channel) string {
	p := x.Pin
	if p == nil {
		return ch.Key()
	}
	if p.has && ch.Name == p.bound.Channel {
		if k, ok := ch.BoundKey(p.bound); ok {
			p.key = p.bound.Key
			return k
		}
	}
	k, i := ch.NextKey()
	p.key = i
	return k
}

// attemptFailed moves the conversation off its bound channel and key when
// they failed it by the channel's fault. A 429 is the key's rate or quota:
// the conversation moves to the channel's next key, so its next turn does
// not meet the same limit (another channel that answers this turn binds it
// instead). Any other failure leaves it to whichever channel answers.
func (e *Engine) attemptFailed(x *Exchange, ch *routing.Channel, f *Failure) {
	p := x.Pin
	if p == nil || !p.has || ch.Name != p.bound.Channel || !f.Channel {
		return
	}
	p.has = false
	if f.UpstreamStatus != http.StatusTooManyRequests && f.Err.Status != http.StatusTooManyRequests {
		e.Affinity.Forget(p.id)
		e.Affinity.Moved(routing.MoveFailed)
		return
	}
	if n := len(ch.Keys); n > 1 {
		next := (p.bound.Key + 1) % n
		e.Affinity.Bind(p.id, routing.Binding{Channel: ch.Name, Key: next, KeySum: routing.KeySum(ch.Keys[next])})
	} else {
		e.Affinity.Forget(p.id)
	}
	e.Affinity.Moved(routing.MoveRateLimited)
}

// answered binds the conversation to the channel and key that answered
// it, or refreshes the binding it already has.
func (e *Engine) answered(x *Exchange, ch *routing.Channel) {
	p := x.Pin
	if p == nil || e.Affinity == nil {
		return
	}
	b := routing.Binding{Channel: ch.Name, Key: p.key}
	if p.key >= 0 && p.key < len(ch.Keys) {
		b.KeySum = routing.KeySum(ch.Keys[p.key])
	}
	e.Affinity.Bind(p.id, b)
}
