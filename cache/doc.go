// Package cache is the gateway's exact response cache: a complete,
// successful answer to a deterministic request is kept, encoded in the
// caller's dialect (a body, or a stream's events in their order with their
// timing), and served again to the same request from the same user (or
// key, or anyone, as configured) until it expires.
//
// The key is a hash of the canonical request: its JSON with keys sorted and
// whitespace dropped, the model, the dialect, the path and the headers that
// change an answer, and the scope. Entries are bounded in bytes, each and
// all together, and evicted least recently used first.
//
// It imports no Caddy package: caddymodule reads its configuration and the
// engine asks it, so it is tested on its own.
package cache
