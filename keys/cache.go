package keys

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/caddy-model-gateway/gateway/store"
)

// Identity is who a key belongs to.
type Identity struct {
	Token *store.Token
	User  *store.User
}

// Cache maps key hashes to identities. An entry older than Fresh is
// reloaded in the background while the cached one keeps serving, so
// disabling a token takes effect within about Fresh; an entry unused for
// Expire is dropped. Unknown keys are remembered for Expire too, in a
// bounded LRU (a client sending random keys cannot grow it without end),
// so a client retrying a wrong key does not reach the database every time.
type Cache struct {
	st     store.Store
	Fresh  time.Duration
	Expire time.Duration
	// OnLoad is called after an identity is read from the store.
	OnLoad func(*Identity)

	mu      sync.Mutex
	entries map[string]*entry // known keys
	unknown *LRU              // hashes of keys the store does not have
	flight  singleflight.Group
	// counted under mu, which Lookup holds anyway
	hits, misses uint64
}

// Stats returns how many lookups were answered from the cache and how many
// had to read the store.
func (c *Cache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// MaxUnknownKeys bounds how many unknown keys a Cache remembers.
const MaxUnknownKeys = 10000

type entry struct {
	id       *Identity // nil: the key is unknown
	loadedAt time.Time
	usedAt   time.Time
	loading  bool
}

// NewCache returns a cache over st.
func NewCache(st store.Store, fresh time.Duration) *Cache {
	return &Cache{st: st, Fresh: fresh, Expire: time.Minute, entries: map[string]*entry{}, unknown: NewLRU(MaxUnknownKeys)}
}

// ErrUnknownKey is returned for a key the store does not have.
var ErrUnknownKey = errors.New("unknown key")

// Lookup finds the identity for a key.
func (c *Cache) Lookup(ctx context.Context, key string) (*Identity, error) {
	h := Hash(key)
	now := time.Now()
	if c.unknown.Seen(h, now, c.Expire) {
		return nil, ErrUnknownKey
	}
	c.mu.Lock()
	e, ok := c.entries[h]
	if ok && now.Sub(e.loadedAt) < c.Expire {
		c.hits++
		e.usedAt = now
		if now.Sub(e.loadedAt) > c.Fresh && !e.loading {
			e.loading = true
			go c.reload(h)
		}
		id := e.id
		c.mu.Unlock()
		if id == nil {
			return nil, ErrUnknownKey
		}
		return id, nil
	}
	c.misses++
	c.mu.Unlock()
	// concurrent first requests with one key share one read, which does
	// not die with whichever client asked first
	v, err, _ := c.flight.Do(h, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return c.load(ctx, h)
	})
	id, _ := v.(*Identity)
	if errors.Is(err, ErrUnknownKey) {
		c.unknown.Add(h, now)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[h] = &entry{id: id, loadedAt: now, usedAt: now}
	c.mu.Unlock()
	return id, nil
}

func (c *Cache) reload(h string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.load(ctx, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok {
		return
	}
	e.loading = false
	if err != nil && !errors.Is(err, ErrUnknownKey) {
		return // keep serving the old entry; retry on a later request
	}
	e.id, e.loadedAt = id, time.Now()
}

func (c *Cache) load(ctx context.Context, h string) (*Identity, error) {
	t, err := c.st.TokenByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnknownKey
	}
	if err != nil {
		return nil, err
	}
	u, err := c.st.UserByID(ctx, t.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnknownKey
	}
	if err != nil {
		return nil, err
	}
	id := &Identity{Token: t, User: u}
	if c.OnLoad != nil {
		c.OnLoad(id)
	}
	return id, nil
}

// Forget drops a key hash, for changes this process made itself.
func (c *Cache) Forget(keyHash string) {
	c.unknown.Remove(keyHash)
	c.mu.Lock()
	delete(c.entries, keyHash)
	c.mu.Unlock()
}

// ForgetUser drops every key of a user, for a change to the user this
// process made itself (their limits, say), so it applies to their next
// request rather than after the next reload.
func (c *Cache) ForgetUser(userID int64) {
	c.mu.Lock()
	for h, e := range c.entries {
		if e.id != nil && e.id.User != nil && e.id.User.ID == userID {
			delete(c.entries, h)
		}
	}
	c.mu.Unlock()
}

// Sweep drops entries unused for longer than Expire; run it periodically.
func (c *Cache) Sweep() {
	now := time.Now()
	c.mu.Lock()
	for h, e := range c.entries {
		if now.Sub(e.usedAt) > c.Expire {
			delete(c.entries, h)
		}
	}
	c.mu.Unlock()
}
