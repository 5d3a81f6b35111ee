// Package engine is the request engine every model endpoint runs on: it
// plans the channels for a model, makes one attempt per channel through a
// step the endpoint supplies, classifies a failed attempt with one fault
// classifier, honours an upstream's Retry-After, counts the channel's
// failure for ejection and for metrics in one place, and fails over until
// a channel answers, the client has gone or the retry budget is spent.
//
// It knows no vendor (adapters do) and no server: it must not import Caddy
// or caddymodule, so it is unit-tested on its own. Endpoints in caddymodule
// decode the route, call the engine and write the answer.
package engine
