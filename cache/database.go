package cache

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

// Backend holds entries: the process's Memory, or the Database several
// instances share.
type Backend interface {
	// Get returns k's entry, nil when it has none (or it expired).
	Get(ctx context.Context, k Key) *Entry
	// Put keeps e under k; false when it was not kept.
	Put(k Key, e *Entry) bool
}

// ResponseStore is the part of the gateway's store the Database uses.
type ResponseStore interface {
	GetCachedResponse(ctx context.Context, key string, now time.Time) ([]byte, error)
	PutCachedResponse(ctx context.Context, key string, entry []byte, expires, now time.Time, maxBytes int64) error
}

// Database keeps entries in the gateway's database, for instances that
// share it: bounded in bytes by the store, the least recently used
// evicted. A lookup waits at most Timeout (then it is a miss); an answer
// is written after its request, by at most MaxWriting writes at once,
// others dropped: the cache never holds a request up.
type Database struct {
	st       ResponseStore
	maxBytes int64
	writing  chan struct{}
	// Timeout bounds each read and write
	Timeout time.Duration
	// OnError is told of a failed read or write (nil: ignored)
	OnError func(op string, err error)
}

// Bounds of Database.
const (
	DefaultDatabaseTimeout = time.Second
	MaxWriting             = 4
)

// NewDatabase keeps entries in st, at most maxBytes of them.
func NewDatabase(st ResponseStore, maxBytes int64) *Database {
	return &Database{st: st, maxBytes: maxBytes, writing: make(chan struct{}, MaxWriting), Timeout: DefaultDatabaseTimeout}
}

// stored is an entry as the database keeps it.
type stored struct {
	ContentType string         `json:"content_type"`
	Body        []byte         `json:"body"`
	Events      [][2]int64     `json:"events,omitempty"` // end, nanoseconds after the first
	Usage       adapters.Usage `json:"usage"`
	Channel     string         `json:"channel"`
}

// Get reads k's entry.
func (d *Database) Get(ctx context.Context, k Key) *Entry {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	b, err := d.st.GetCachedResponse(ctx, hex.EncodeToString(k[:]), time.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && d.OnError != nil {
			d.OnError("read", err)
		}
		return nil
	}
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		if d.OnError != nil {
			d.OnError("decode", err)
		}
		return nil
	}
	e := &Entry{ContentType: s.ContentType, Body: s.Body, Usage: s.Usage, Channel: s.Channel}
	for _, ev := range s.Events {
		if ev[0] < 0 || ev[0] > int64(len(s.Body)) {
			return nil // not written by this gateway
		}
		e.Events = append(e.Events, Event{End: int(ev[0]), At: time.Duration(ev[1])})
	}
	return e
}

// Put writes e in the background, unless MaxWriting writes are under way.
func (d *Database) Put(k Key, e *Entry) bool {
	s := stored{ContentType: e.ContentType, Body: e.Body, Usage: e.Usage, Channel: e.Channel}
	for _, ev := range e.Events {
		s.Events = append(s.Events, [2]int64{int64(ev.End), int64(ev.At)})
	}
	b, err := json.Marshal(&s)
	if err != nil || int64(len(b)) > d.maxBytes {
		return false
	}
	select {
	case d.writing <- struct{}{}:
	default:
		return false
	}
	go func() {
		defer func() { <-d.writing }()
		ctx, cancel := context.WithTimeout(context.Background(), d.Timeout)
		defer cancel()
		now := time.Now()
		if err := d.st.PutCachedResponse(ctx, hex.EncodeToString(k[:]), b, e.Expires, now, d.maxBytes); err != nil && d.OnError != nil {
			d.OnError("write", err)
		}
	}()
	return true
}
