package engine

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

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
	// place chooses the channel and key while there is no binding
	place uint64
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
//
// place is where the conversation goes while it has no binding (see
// placeFirst): a hash of the name and the key's id that every instance
// and every restart computes alike, so they all pick the same channel and
// key. id, the binding's name in the table, hashes place again under
// seeds of the process's own: one caller's crafted names can collide only
// with its own conversations, never aim at another caller's.
func conversationID(x *Exchange) (id routing.ConversationID, place uint64, ok bool) {
	c := x.Req.Chat
	if c == nil {
		return id, 0, false
	}
	h := nameHash{d: xxhash.New()}
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
		if !writeStart(&h, c) {
			return id, 0, false
		}
	}
	var tokenID int64
	if x.ID != nil && x.ID.Token != nil {
		tokenID = x.ID.Token.ID
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(tokenID))
	sum := h.d.Sum64()
	binary.BigEndian.PutUint64(b[8:], sum)
	binary.BigEndian.PutUint64(id[:8], maphash.Bytes(idSeeds[0], b[:]))
	binary.BigEndian.PutUint64(id[8:], maphash.Bytes(idSeeds[1], b[:]))
	return id, mix(sum ^ mix(uint64(tokenID))), true
}

// idSeeds key the binding table's ids: seeds of the process's own.
var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// nameHash is a stable 64-bit hash (xxHash, the same in every process) of
// what names a conversation; hashing a long prompt copies nothing.
type nameHash struct{ d *xxhash.Digest }

func (h *nameHash) write(p []byte) { _, _ = h.d.Write(p) }

// field writes s with its length first, so fields cannot run into each
// other.
func (h *nameHash) field(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.write(n[:])
	_, _ = h.d.WriteString(s)
}

func (h *nameHash) fieldBytes(p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.write(n[:])
	h.write(p)
}

// writeStart hashes what stays the same over a conversation's turns: its
// tools, system prompt and first user message. It reports false when there
// is no user message to anchor it.
func writeStart(h *nameHash, c *adapters.ChatRequest) bool {
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

func writeParts(h *nameHash, parts []adapters.Part) {
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

// mix is SplitMix64's finalizer: every bit of x moves every bit of the
// result, so a hash's low bits can choose among a few channels or keys.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// placeOn is place as seen by channel name: one draw per channel.
func placeOn(place uint64, name string) uint64 {
	h := place
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 0x100000001b3
	}
	return mix(h)
}

// placeFirst puts first, among the plan's channels of its best priority,
// the one a conversation at place goes to: weighted rendezvous hashing,
// so channels get conversations in proportion to their weights, every
// instance picks the same, and a channel that leaves the plan moves only
// its own conversations. The rest keep routing's order.
func placeFirst(plan []*routing.Channel, place uint64) {
	best, bestScore := -1, 0.0
	for i, ch := range plan {
		if ch.Priority != plan[0].Priority {
			break
		}
		u := (float64(placeOn(place, ch.Name)>>11) + 0.5) / (1 << 53) // in (0, 1)
		if score := float64(max(ch.Weight, 1)) / -math.Log(u); best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	if best > 0 {
		ch := plan[best]
		copy(plan[1:best+1], plan[:best])
		plan[0] = ch
	}
}

// pin orders a conversation's plan (every channel that may serve it, in
// routing's order): when the conversation is bound to a channel that the
// plan still holds (healthy, serving the model and the request's
// operation) with its key still configured, that channel goes first;
// otherwise the binding is dropped and the move counted, and a
// conversation with none starts where its place puts it. Affinity chooses
// among the channels of the plan's first priority only: a conversation
// that failed over to a backup goes back to the channel the operator
// prefers once that serves again.
func (e *Engine) pin(x *Exchange, plan []*routing.Channel) []*routing.Channel {
	id, place, ok := conversationID(x)
	if !ok {
		return plan
	}
	x.Pin = &Pin{id: id, key: -1, place: place}
	b, bound := e.Affinity.Lookup(id)
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
	if !x.Pin.has && len(plan) > 0 {
		placeFirst(plan, place)
	}
	return plan
}

// upstreamKey is the key an attempt on ch sends: the bound key on the
// bound channel, else the key the conversation's place picks on ch (the
// same on every instance).
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
	if len(ch.Keys) == 0 {
		p.key = -1
		return ""
	}
	p.key = int(mix(placeOn(p.place, ch.Name)^0x9e3779b97f4a7c15) % uint64(len(ch.Keys)))
	return ch.Keys[p.key]
}

// attemptFailed moves the conversation off the key an attempt used when
// that key failed it by the channel's fault (a 429 for the key's rate or
// quota, refused credentials, an outage): it is bound to the channel's
// next key, so its next turn does not meet the same fault, whether the
// failed key was its binding or where its name placed it (a revoked key
// would otherwise fail every turn of the conversations placed on it). A
// channel that answers this turn binds it instead. Leaving a binding is
// counted as a move.
func (e *Engine) attemptFailed(x *Exchange, ch *routing.Channel, f *Failure) {
	p := x.Pin
	if p == nil || !f.Channel {
		return
	}
	bound := p.has && ch.Name == p.bound.Channel
	if n := len(ch.Keys); n > 1 && p.key >= 0 {
		next := (p.key + 1) % n
		e.Affinity.Bind(p.id, routing.Binding{Channel: ch.Name, Key: next, KeySum: routing.KeySum(ch.Keys[next])})
	} else if bound {
		e.Affinity.Forget(p.id)
	}
	if !bound {
		return
	}
	p.has = false
	if f.UpstreamStatus == http.StatusTooManyRequests || f.Err.Status == http.StatusTooManyRequests {
		e.Affinity.Moved(routing.MoveRateLimited)
	} else {
		e.Affinity.Moved(routing.MoveFailed)
	}
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
