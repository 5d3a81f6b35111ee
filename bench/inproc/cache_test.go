package inproc

import "testing"

// Deterministic requests (temperature 0) the response cache keeps.
var (
	cachedChatBody   = []byte(`{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"Say hello"}]}`)
	cachedStreamBody = []byte(`{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`)
)

// BenchmarkCache prices the response cache (docs/cache.md) per request on
// the gateway's site, against reverse_proxy and the gateway without it:
// hit, a request answered from the cache; miss, one it records and keeps
// (Cache-Control: no-cache asks a fresh answer every time: the key, the
// recording and the store, on top of the relay); uncached, a sampled
// request of a key the cache is on for (the decision only); gateway, the
// same request of a key the cache is not on for. `make bench` prints the
// ratios (bench/cmd/bench/cache.go).
func BenchmarkCache(b *testing.B) {
	e := start(b)
	cached := e.gateway
	cached.cached = true
	fresh := cached
	fresh.fresh = true
	for _, kind := range []struct {
		name                 string
		plain, deterministic []byte
	}{{"plain", chatBody, cachedChatBody}, {"stream", streamBody, cachedStreamBody}} {
		b.Run(kind.name+"/reverse_proxy", func(b *testing.B) { bench(b, e, e.proxy, kind.plain, 0) })
		b.Run(kind.name+"/gateway", func(b *testing.B) { bench(b, e, e.gateway, kind.plain, 0) })
		b.Run(kind.name+"/uncached", func(b *testing.B) { bench(b, e, cached, kind.plain, 0) })
		b.Run(kind.name+"/miss", func(b *testing.B) { bench(b, e, fresh, kind.deterministic, 0) })
		b.Run(kind.name+"/hit", func(b *testing.B) { bench(b, e, cached, kind.deterministic, 0) })
	}
}
