package cache

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Header is the request and response header of the cache: a request sends
// "use" to ask for it (required in mode request) or "refuse" to keep out
// of it; an answer says "hit" or "miss".
const Header = "X-Gateway-Cache"

// Values of Header.
const (
	Use    = "use"
	Refuse = "refuse"
	Hit    = "hit"
	Miss   = "miss"
)

// Cache is one configuration's cache over the entries it shares: the
// process's, or the database's.
type Cache struct {
	Config
	Store Backend
	// Observer counts the requests the cache was used for; may be nil
	Observer Observer
}

// Observer is told of each request the cache was used for: a hit (and
// what it saved) or a miss. The server layer's metrics implement it.
type Observer interface {
	Used(hit bool, saved int64)
}

// New is the cache c configures over the process's entries mem, or with
// store database over shared; nil when c is off. mem's entries are
// dropped when they are not used: a reload that turns the cache off, or
// to the database, frees them.
func New(c *Config, mem *Memory, shared ResponseStore) *Cache {
	if c == nil || !c.Enable {
		mem.Resize(0)
		return nil
	}
	cfg := c.withDefaults()
	if cfg.Store == StoreDatabase {
		mem.Resize(0)
		return &Cache{Config: cfg, Store: NewDatabase(shared, cfg.MaxBytes)}
	}
	mem.Resize(cfg.MaxBytes)
	return &Cache{Config: cfg, Store: mem}
}

// Ask is what decides whether a request uses the cache.
type Ask struct {
	Header    http.Header
	TokenID   int64
	TokenName string
	// Plan pays the request ("" for the balance)
	Plan string
	// Deterministic: the same request gets the same answer (temperature
	// 0 or a seed, no tool the vendor runs)
	Deterministic bool
}

// Decision says what a request does with the cache: Lookup serves a kept
// answer, Store keeps the fresh one.
type Decision struct {
	Lookup, Store bool
}

// Decide applies the configuration and the request's own headers:
// X-Gateway-Cache refuse or Cache-Control no-store keep it out; no-cache
// asks for a fresh answer (which is then kept).
func (c *Cache) Decide(a Ask) Decision {
	if c == nil || !c.covers(a.TokenID, a.TokenName, a.Plan) || (!a.Deterministic && !c.Force) {
		return Decision{}
	}
	asked := strings.ToLower(strings.TrimSpace(a.Header.Get(Header)))
	if asked == Refuse || (c.Mode == ModeRequest && asked != Use) {
		return Decision{}
	}
	d := Decision{Lookup: true, Store: true}
	for _, v := range a.Header.Values("Cache-Control") {
		for _, dir := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(dir)) {
			case "no-store":
				return Decision{}
			case "no-cache":
				d.Lookup = false
			}
		}
	}
	return d
}

// Get returns k's entry, nil on a miss.
func (c *Cache) Get(ctx context.Context, k Key) *Entry { return c.Store.Get(ctx, k) }

// Recorder keeps a miss's answer as it is written, within max_entry_bytes:
// past it, it drops what it held and keeps nothing more.
type Recorder struct {
	max   int64
	start time.Time
	e     Entry
	over  bool
}

// Record starts recording a miss's answer.
func (c *Cache) Record() *Recorder { return &Recorder{max: c.MaxEntry} }

// Body records a whole answer (copied).
func (r *Recorder) Body(contentType string, b []byte) {
	r.e.ContentType = contentType
	r.add(b)
}

// ContentType records a stream's content type.
func (r *Recorder) ContentType(ct string) { r.e.ContentType = ct }

// Event records one encoded stream event (copied), at now.
func (r *Recorder) Event(b []byte, now time.Time) {
	if len(b) == 0 || r.over {
		return
	}
	if r.e.Events == nil {
		r.start = now
	}
	if !r.add(b) {
		return
	}
	r.e.Events = append(r.e.Events, Event{End: len(r.e.Body), At: now.Sub(r.start)})
}

func (r *Recorder) add(b []byte) bool {
	if r.over {
		return false
	}
	if r.e.Size()+int64(len(b))+eventOverhead > r.max {
		r.over, r.e = true, Entry{}
		return false
	}
	r.e.Body = append(r.e.Body, b...)
	return true
}

// Over reports whether the answer outgrew max_entry_bytes.
func (r *Recorder) Over() bool { return r.over }

// Commit keeps a complete, successful answer recorded by r under k.
func (c *Cache) Commit(k Key, r *Recorder, u adapters.Usage, channel string, now time.Time) bool {
	if r.over || len(r.e.Body) == 0 {
		return false
	}
	e := r.e
	e.Usage, e.Channel, e.Expires = u, channel, now.Add(c.TTL)
	// the recorded bytes' spare capacity is given back
	e.Body = append([]byte(nil), e.Body...)
	return c.Store.Put(k, &e)
}

// Writer is where a hit is written: a ResponseWriter and its flush.
type Writer interface {
	Write([]byte) (int, error)
	Flush() error
}

// Play writes a kept stream's events: at once in one write, or with the
// gaps they came with (ended by ctx: the client gone).
func (c *Cache) Play(ctx context.Context, w Writer, e *Entry) error {
	if c.Config.Replay != ReplayPace || len(e.Events) == 0 {
		if _, err := w.Write(e.Body); err != nil {
			return err
		}
		return w.Flush()
	}
	start, prev := time.Now(), 0
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for _, ev := range e.Events {
		if wait := ev.At - time.Since(start); wait > 0 {
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		if _, err := w.Write(e.Body[prev:ev.End]); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		prev = ev.End
	}
	return nil
}
