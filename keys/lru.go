package keys

import (
	"container/list"
	"sync"
	"time"
)

// LRU is a bounded set of recent keys, each with a time: when full, the
// least recently touched one goes. Safe for concurrent use.
type LRU struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent
	items map[string]*list.Element
}

type lruItem struct {
	key   string
	at    time.Time
	count int
}

// NewLRU holds at most max keys.
func NewLRU(max int) *LRU {
	return &LRU{max: max, order: list.New(), items: make(map[string]*list.Element)}
}

// Len is how many keys it holds.
func (l *LRU) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// Seen reports whether key was added no longer than within ago before now.
func (l *LRU) Seen(key string, now time.Time, within time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		return false
	}
	if now.Sub(el.Value.(*lruItem).at) > within {
		l.remove(el)
		return false
	}
	l.order.MoveToFront(el)
	return true
}

// Add records key at now.
func (l *LRU) Add(key string, now time.Time) {
	l.Count(key, now, 0)
}

// Count adds one to key's count, restarting it when the count began more
// than window ago (window 0: never), and returns the new count.
func (l *LRU) Count(key string, now time.Time, window time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok {
		it := el.Value.(*lruItem)
		if window > 0 && now.Sub(it.at) > window {
			it.at, it.count = now, 0
		} else if window == 0 {
			it.at = now
		}
		it.count++
		l.order.MoveToFront(el)
		return it.count
	}
	l.items[key] = l.order.PushFront(&lruItem{key: key, at: now, count: 1})
	for l.order.Len() > l.max {
		l.remove(l.order.Back())
	}
	return 1
}

// Peek returns key's count, 0 when it is absent or its window has passed.
func (l *LRU) Peek(key string, now time.Time, window time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		return 0
	}
	if it := el.Value.(*lruItem); window == 0 || now.Sub(it.at) <= window {
		return it.count
	}
	return 0
}

// Remove drops key.
func (l *LRU) Remove(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok {
		l.remove(el)
	}
}

// Reset drops every key.
func (l *LRU) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.order.Init()
	clear(l.items)
}

func (l *LRU) remove(el *list.Element) {
	l.order.Remove(el)
	delete(l.items, el.Value.(*lruItem).key)
}
