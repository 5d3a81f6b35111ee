package cache

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Entry is one answer kept: a body, or a stream's encoded events in their
// order, as the caller's dialect wrote them on the miss.
type Entry struct {
	ContentType string
	// Body is the answer's bytes: a body, or a stream's events one after
	// the other, which Events cut (nil for a body)
	Body   []byte
	Events []Event
	// Usage is what the miss was billed on: a hit's row shows it, and
	// what the hit saved is its price
	Usage adapters.Usage
	// Channel answered the miss
	Channel string
	// Expires is when the entry stops being served
	Expires time.Time
}

// Event is one encoded stream event: it ends at End in the entry's Body
// and was written At after the stream's first.
type Event struct {
	End int
	At  time.Duration
}

// entryOverhead is what an entry costs beside its bytes (its struct, the
// map slot, the list element), and eventOverhead an event: counted so that
// many tiny entries cannot hold more memory than max_bytes says.
const (
	entryOverhead = 256
	eventOverhead = 16
)

// Size is the bytes e is counted as.
func (e *Entry) Size() int64 {
	n := int64(entryOverhead + len(e.Body) + len(e.ContentType) + len(e.Channel))
	return n + int64(len(e.Events))*eventOverhead
}

// Memory is a process's entries: bounded in bytes, least recently used
// evicted first, an expired entry dropped when it is met. One is shared by
// every configuration of a process, so a reload keeps its entries.
type Memory struct {
	mu       sync.Mutex
	m        map[Key]*list.Element
	lru      list.List // front: most recently used
	bytes    int64
	maxBytes int64
	// Now is the clock (tests set it)
	Now func() time.Time
}

type item struct {
	k Key
	e *Entry
	n int64
}

// NewMemory holds at most maxBytes.
func NewMemory(maxBytes int64) *Memory {
	return &Memory{m: map[Key]*list.Element{}, maxBytes: maxBytes}
}

func (s *Memory) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Resize changes the bound, evicting what no longer fits.
func (s *Memory) Resize(maxBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxBytes = maxBytes
	s.trim()
}

// Get returns k's entry unless it has expired. The entry is shared: read
// it, never change it.
func (s *Memory) Get(_ context.Context, k Key) *Entry {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.m[k]
	if !ok {
		return nil
	}
	it := el.Value.(*item)
	if !now.Before(it.e.Expires) {
		s.remove(el)
		return nil
	}
	s.lru.MoveToFront(el)
	return it.e
}

// Put keeps e under k, evicting the least recently used entries until
// every entry fits; an entry larger than the whole bound is not kept.
func (s *Memory) Put(k Key, e *Entry) bool {
	n := e.Size()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.maxBytes {
		return false
	}
	if el, ok := s.m[k]; ok {
		s.remove(el)
	}
	s.m[k] = s.lru.PushFront(&item{k: k, e: e, n: n})
	s.bytes += n
	s.trim()
	return true
}

// Stats are the entries held and their bytes.
func (s *Memory) Stats() (entries int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m), s.bytes
}

func (s *Memory) trim() {
	for s.bytes > s.maxBytes {
		el := s.lru.Back()
		if el == nil {
			return
		}
		s.remove(el)
	}
}

func (s *Memory) remove(el *list.Element) {
	it := s.lru.Remove(el).(*item)
	delete(s.m, it.k)
	s.bytes -= it.n
}
