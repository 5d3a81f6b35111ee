package engine

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/cache"
)

// cached is what an exchange keeps of the response cache: its key, the
// entry a hit served, or the recorder of a miss's answer (nil when the
// request asked for a fresh answer that is not to be kept).
type cached struct {
	key cache.Key
	hit *cache.Entry
	rec *cache.Recorder
}

// cacheHeaders are the request headers that change an answer besides its
// body, part of the key.
var cacheHeaders = [...]string{"anthropic-version", "anthropic-beta", "openai-beta"}

// serveCached answers an admitted request from the response cache when it
// holds its answer (served true); on a miss it arranges for the answer to
// be recorded, and Settle keeps it if it completes.
func (e *Engine) serveCached(x *Exchange) (served bool, err error) {
	c := e.Cache
	if c == nil || !cacheableOp(x.Req.Op) {
		return false, nil
	}
	d := c.Decide(cache.Ask{Header: x.R.Header, TokenID: x.ID.Token.ID, TokenName: x.ID.Token.Name,
		Plan: x.Hold.Windows.PaidBy(), Deterministic: Deterministic(x.Req)})
	if !d.Lookup && !d.Store {
		return false, nil
	}
	r := cache.Request{Scope: c.Scope, UserID: x.ID.User.ID, TokenID: x.ID.Token.ID, Dialect: x.Dialect.Name(),
		Path: x.R.URL.Path, Model: x.Req.Model, Stream: x.Req.Stream, Body: x.Req.Raw}
	var hv [len(cacheHeaders)]string
	for i, h := range cacheHeaders {
		hv[i] = strings.Join(x.R.Header.Values(h), ",")
	}
	r.Headers = hv[:]
	k, kerr := cache.KeyOf(&r)
	if kerr != nil {
		return false, nil // not JSON: not cacheable
	}
	x.cache = &cached{key: k}
	if d.Lookup {
		if ent := c.Get(x.R.Context(), k); ent != nil {
			x.cache.hit = ent
			return true, e.replay(x, ent)
		}
	}
	if d.Store {
		x.cache.rec = c.Record()
	}
	x.W.Header().Set(cache.Header, cache.Miss)
	return false, nil
}

// cacheableOp: the operations whose answer is text the dialect encodes.
func cacheableOp(op adapters.Operation) bool {
	switch op {
	case adapters.OpChat, adapters.OpCompletion, adapters.OpEmbedding, adapters.OpResponses, adapters.OpRerank:
		return true
	}
	return false
}

// Deterministic reports whether req asks for the one answer a model gives
// it: embeddings and reranking always; a conversation or a completion
// with temperature 0 or a seed, using no tool the vendor runs (a search's
// results change) and no state the vendor keeps (previous_response_id).
func Deterministic(req *adapters.Request) bool {
	switch req.Op {
	case adapters.OpEmbedding, adapters.OpRerank:
		return true
	case adapters.OpCompletion:
		var o struct {
			Temperature *float64        `json:"temperature"`
			Seed        json.RawMessage `json:"seed"`
		}
		if json.Unmarshal(req.Raw, &o) != nil {
			return false
		}
		return o.Temperature != nil && *o.Temperature == 0 || len(o.Seed) > 0 && string(o.Seed) != "null"
	}
	ch := req.Chat
	if ch == nil || len(req.Untranslatable) > 0 {
		return false
	}
	for _, t := range ch.Tools {
		if t.Type != "function" {
			return false
		}
	}
	return ch.Temperature != nil && *ch.Temperature == 0 || ch.Seed != nil
}

// replay writes a hit: the body, or the stream's events as the miss
// recorded them.
func (e *Engine) replay(x *Exchange, ent *cache.Entry) error {
	h := x.W.Header()
	h.Set(cache.Header, cache.Hit)
	h.Set("Content-Type", ent.ContentType)
	if x.Req.Stream {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	x.Usage = ent.Usage
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	x.TTFB = time.Since(x.Start)
	var err error
	if x.Req.Stream {
		err = e.Cache.Play(x.R.Context(), flusher{x.W, http.NewResponseController(x.W)}, ent)
	} else {
		_, err = x.W.Write(ent.Body)
	}
	if err != nil {
		x.Status, x.ErrMsg = adapters.StatusClientClosed, "client disconnected"
	}
	return nil
}

type flusher struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flusher) Flush() error { return f.rc.Flush() }

// recording is the recorder of a miss's answer, nil when none is kept.
func (x *Exchange) recording() *cache.Recorder {
	if x.cache == nil {
		return nil
	}
	return x.cache.rec
}

// CacheHit reports whether the request was answered from the cache.
func (x *Exchange) CacheHit() bool { return x.cache != nil && x.cache.hit != nil }

// keepAnswer keeps a miss's complete, successful answer, billed as
// Settle will bill it. It runs before the answer's last bytes are
// written: a client that asks again as soon as it has them finds it.
// A client that has already left is not trusted to have had it whole.
func (e *Engine) keepAnswer(x *Exchange) {
	rec := x.recording()
	if rec == nil || x.Channel == "" || x.Cut || x.ErrMsg != "" || x.R.Context().Err() != nil {
		return
	}
	e.Cache.Commit(x.cache.key, rec, x.billedUsage(), x.Channel, time.Now())
	x.cache.rec = nil
}
