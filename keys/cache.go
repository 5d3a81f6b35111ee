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
	// gen counts the entries dropped for a change: a read begun before a
	// change is not cached after it
	gen uint64
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
		c.mu.Lock()
		gen := c.gen
		c.mu.Unlock()
		id, err := c.load(ctx, h)
		return read{id, gen}, err
	})
	r, _ := v.(read)
	id, gen := r.id, r.gen
	if err != nil && !errors.Is(err, ErrUnknownKey) {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		// a change came while the store was read: answer with what was
		// read, but do not remember it
		return id, err
	}
	if err != nil {
		c.unknown.Add(h, now)
		return nil, err
	}
	c.entries[h] = &entry{id: id, loadedAt: now, usedAt: now}
	return id, nil
}

// read is an identity read from the store, with the generation it was
// begun in.
type read struct {
	id  *Identity
	gen uint64
}

func (c *Cache) reload(h string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	id, err := c.load(ctx, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok {
		return
	}
	e.loading = false
	if err != nil && !errors.Is(err, ErrUnknownKey) || c.gen != gen {
		// keep serving the old entry; retry on a later request (after a
		// change, what was read may predate it)
		return
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
	c.gen++
	delete(c.entries, keyHash)
	c.mu.Unlock()
}

// ForgetUser drops every key of a user, for a change to the user this
// process made itself (their limits, say), so it applies to their next
// request rather than after the next reload.
func (c *Cache) ForgetUser(userID int64) {
	c.mu.Lock()
	c.gen++
	for h, e := range c.entries {
		if e.id != nil && e.id.User != nil && e.id.User.ID == userID {
			delete(c.entries, h)
		}
	}
	c.mu.Unlock()
}

// ForgetAll drops every entry, known keys and unknown ones, for when
// changes may have been missed.
func (c *Cache) ForgetAll() {
	c.unknown.Reset()
	c.mu.Lock()
	c.gen++
	clear(c.entries)
	c.mu.Unlock()
}

// ChangeFeed is a store that announces the changes to keys and users that
// any process commits (PostgreSQL's LISTEN/NOTIFY, store/postgres):
// changed(hash, 0) for a key, changed("", id) for a user, changed("", 0)
// when announcements may have been missed. It calls failed when it loses
// its connection, and retries until ctx ends.
type ChangeFeed interface {
	WatchIdentities(ctx context.Context, changed func(keyHash string, userID int64), failed func(error))
}

// Follow drops cached entries as feed announces their changes, until ctx
// ends, so that a change made on another instance or with the CLI applies
// to the next request here rather than after Fresh (which stays the
// fallback while the feed is down).
func (c *Cache) Follow(ctx context.Context, feed ChangeFeed, failed func(error)) {
	feed.WatchIdentities(ctx, func(keyHash string, userID int64) {
		switch {
		case keyHash != "":
			c.Forget(keyHash)
		case userID != 0:
			c.ForgetUser(userID)
		default:
			c.ForgetAll()
		}
	}, failed)
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
