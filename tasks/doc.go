// Package tasks is the task engine and the task endpoint's dialect: how
// POST /api/generate/submit bodies read (Form A and Form B), how its errors
// and answers are shaped, which callback URLs it takes, and what happens to
// a task from its submit to its settlement (reservation, failover over the
// plan's channels, the store-leased poller, refunds, max age).
//
// It imports no Caddy package: the gateway's Caddy layer decodes the
// route, calls an Engine and writes the answer, and hands the engine what
// it does not own (the channels, the failover loop, the ledger, rate
// limits) as small interfaces and funcs.
package tasks
