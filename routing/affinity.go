package routing

import (
	"container/list"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Prompt-cache affinity: vendors cache a prompt's prefix per API key, so a
// conversation whose turns are spread over several keys or channels pays
// the full input price on every turn. An Affinity remembers, per
// conversation, the channel and key that last answered it, so the planner
// can put that channel first and the channel hand out that key.

// Affinity defaults, as the vendors keep a prompt cache: about an hour
// at most (Anthropic's longest TTL, OpenAI's extended retention aside).
const (
	DefaultAffinityTTL        = time.Hour
	DefaultAffinityMaxEntries = 100_000
)

// Reasons a conversation leaves its binding, as gateway_affinity_moves_total
// labels them.
const (
	MoveEjected     = "ejected"      // the bound channel is ejected
	MoveUnavailable = "unavailable"  // the channel is gone, disabled or no longer serves the model
	MoveKeyRemoved  = "key_removed"  // the bound key is no longer configured on the channel
	MoveRateLimited = "rate_limited" // the bound channel answered 429
	MoveFailed      = "failed"       // the bound channel failed otherwise
	// MovePriority: a channel of higher priority than the bound one (which
	// the conversation failed over to) serves the model again
	MovePriority = "priority"
)

// MoveReasons lists every reason, for metrics created up front.
var MoveReasons = [...]string{MoveEjected, MoveUnavailable, MoveKeyRemoved, MoveRateLimited, MoveFailed, MovePriority}

// ConversationID names a conversation within one caller's key: a hash of
// the key's id and the conversation's name, so one caller can neither read
// nor steer another's binding.
type ConversationID [16]byte

// Binding is where a conversation was last answered.
type Binding struct {
	Channel string
	Key     int    // index into the channel's Keys
	KeySum  uint64 // the key's fingerprint, so a reload that changes keys is seen
}

// Affinity is a bounded table of bindings: at most MaxEntries, the least
// recently used dropped first, and a binding unused for TTL forgotten (the
// vendor's cache is gone by then). Safe for concurrent use.
type Affinity struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[ConversationID]*list.Element
	lru list.List // front: most recently used; values are *entry
	// Now is the clock (time.Now when nil), for tests
	Now func() time.Time
	// onMove is told when a conversation leaves its binding and why; a
	// reload replaces it while requests run
	onMove atomic.Pointer[func(reason string)]
}

type entry struct {
	id   ConversationID
	b    Binding
	used time.Time
}

// AffinityConfig is prompt-cache affinity's configuration.
type AffinityConfig struct {
	Off bool `json:"off,omitempty"`
	// TTL is how long an unused binding lasts; default 1h
	TTL time.Duration `json:"ttl,omitempty"`
	// MaxEntries bounds the bindings held; default 100,000
	MaxEntries int `json:"max_entries,omitempty"`
}

// Set sets one option of the Caddyfile's affinity block: off, or ttl and
// max_entries with their values.
func (c *AffinityConfig) Set(opt, v string) error {
	dur, derr := time.ParseDuration(v)
	n, nerr := strconv.Atoi(v)
	switch {
	case opt == "off" && v == "":
		c.Off = true
	case opt == "ttl" && derr == nil && dur > 0:
		c.TTL = dur
	case opt == "max_entries" && nerr == nil && n > 0:
		c.MaxEntries = n
	default:
		return fmt.Errorf("affinity: %s %q: want off, or ttl <duration such as 1h> and max_entries <positive integer> in a block", opt, v)
	}
	return nil
}

// NewAffinity returns a table of at most maxEntries bindings, each kept
// for ttl of inactivity; zero values take the defaults.
func NewAffinity(ttl time.Duration, maxEntries int) *Affinity {
	a := &Affinity{m: map[ConversationID]*list.Element{}}
	a.Configure(ttl, maxEntries)
	return a
}

// Apply configures the table by c (nil: the defaults).
func (a *Affinity) Apply(c *AffinityConfig) {
	if c == nil {
		c = &AffinityConfig{}
	}
	a.Configure(c.TTL, c.MaxEntries)
}

// Configure changes the bounds (a reload keeps the bindings it still
// allows).
func (a *Affinity) Configure(ttl time.Duration, maxEntries int) {
	if ttl <= 0 {
		ttl = DefaultAffinityTTL
	}
	if maxEntries <= 0 {
		maxEntries = DefaultAffinityMaxEntries
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ttl, a.max = ttl, maxEntries
	a.trim()
}

func (a *Affinity) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Lookup returns the conversation's binding, if it has one that has not
// expired. It does not refresh it: only an answer does (Bind).
func (a *Affinity) Lookup(id ConversationID) (Binding, bool) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	el, ok := a.m[id]
	if !ok {
		return Binding{}, false
	}
	e := el.Value.(*entry)
	if now.Sub(e.used) >= a.ttl {
		a.remove(el)
		return Binding{}, false
	}
	return e.b, true
}

// Bind records that the conversation was answered on b, now.
func (a *Affinity) Bind(id ConversationID, b Binding) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.m[id]; ok {
		e := el.Value.(*entry)
		e.b, e.used = b, now
		a.lru.MoveToFront(el)
		return
	}
	a.m[id] = a.lru.PushFront(&entry{id: id, b: b, used: now})
	a.trim()
}

// Forget drops the conversation's binding.
func (a *Affinity) Forget(id ConversationID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.m[id]; ok {
		a.remove(el)
	}
}

// OnMove has f told of every move and its reason (one of the Move*).
func (a *Affinity) OnMove(f func(reason string)) { a.onMove.Store(&f) }

// Moved counts a conversation leaving its binding for reason.
func (a *Affinity) Moved(reason string) {
	if f := a.onMove.Load(); f != nil {
		(*f)(reason)
	}
}

// Len is the number of bindings held, expired ones not yet dropped
// included.
func (a *Affinity) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}

// trim drops the least recently used bindings above the bound and the
// expired ones at the back, so the table's memory follows its use.
func (a *Affinity) trim() {
	now := a.now()
	for el := a.lru.Back(); el != nil; el = a.lru.Back() {
		if len(a.m) <= a.max && now.Sub(el.Value.(*entry).used) < a.ttl {
			return
		}
		a.remove(el)
	}
}

func (a *Affinity) remove(el *list.Element) {
	delete(a.m, el.Value.(*entry).id)
	a.lru.Remove(el)
}

// keySeed fingerprints keys for bindings; it never leaves the process.
var keySeed = maphash.MakeSeed()

// KeySum is the fingerprint of a channel key kept in a Binding.
func KeySum(key string) uint64 { return maphash.String(keySeed, key) }

// NextKey is the channel's next key by rotation, and its index (-1 for a
// channel without keys).
func (c *Channel) NextKey() (string, int) {
	if len(c.Keys) == 0 {
		return "", -1
	}
	i := int((c.next.Add(1) - 1) % uint64(len(c.Keys)))
	return c.Keys[i], i
}

// BoundKey is the key a binding names, if the channel still has it at the
// same place.
func (c *Channel) BoundKey(b Binding) (string, bool) {
	if b.Channel != c.Name {
		return "", false
	}
	if len(c.Keys) == 0 {
		return "", b.Key < 0
	}
	if b.Key < 0 || b.Key >= len(c.Keys) || KeySum(c.Keys[b.Key]) != b.KeySum {
		return "", false
	}
	return c.Keys[b.Key], true
}
