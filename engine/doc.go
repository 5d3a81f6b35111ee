// Package engine is the request engine every model endpoint runs on. A
// request's life, and the room each step lives in:
//
//  1. keys/keyauth (under caddymodule's gateway_auth) authenticates;
//     relayhttp (under gateway_relay) decodes the route and the body
//     (internal/bodies bounds and spools it) and builds an Exchange.
//  2. Engine.Admit checks the model against the key and the configuration
//     and passes billing.Gate: rate limits, the worst-case reservation
//     (Reservation: tokens, media, rerank or Realtime), a usage-queue slot,
//     the ledger's hold.
//  3. plan.go is the one place that plans: Plan orders the model's channels
//     (routing), keeping those whose family has the capability the request
//     needs (Relay, ServeMedia, RealtimePlan, PlanTask, and for the batch
//     endpoints BatchChannels and ChatChannels), within the retry budget;
//     a model whose families all lack it is refused (Unserved).
//  4. Engine.Run tries them: an Attempter sends through the channel's
//     adapter (adapters/<vendor>), Classify decides whose fault a failure
//     is, a channel's fault is counted once (ejection with Retry-After,
//     metrics through Observer, the throttled log line) and the next
//     channel tried, until one answers, the client goes or the budget ends.
//  5. Engine.Serve relays the answer: a stream event by event, a body or a
//     media answer whole, within the channel's Bounds.
//  6. Engine.Settle bills the usage (BilledUsage, MediaCost), settles the
//     gate, writes the usage row and tells the Meter.
//
// Task submits (package tasks) use the same planning (PlanTask), Classify
// and billing.Gate, and RunDetached: the loop of Run, going on after the
// client has gone, since the vendor may already hold the job. A Realtime
// session (RealtimeSession: Open, Relay, Finish) admits and connects
// through the same Admit, RealtimePlan and Run, then reserves and settles
// each response on the same Gate while it relays the two sockets.
//
// It knows no vendor (adapters do) and no server: it must not import Caddy
// or caddymodule, so it is unit-tested on its own.
package engine
