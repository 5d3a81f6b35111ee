// Package tasks is the task engine and the task endpoint's dialect: how
// POST /api/generate/submit bodies read (Form A and Form B), how its errors
// and answers are shaped, which callback URLs it takes, and what happens to
// a task from its submit to its settlement (reservation, failover over the
// plan's channels, the store-leased poller, refunds, max age).
//
// A submit runs on the request engine every endpoint uses: its channels
// are planned and failed over by engine.Engine (one classifier, one count
// of a channel's failures), and its reservation is admitted through
// billing.Gate (rate limits, then the ledger), the same as a chat request.
//
// It imports no Caddy package: the gateway's Caddy layer decodes the
// route, calls an Engine and writes the answer, and hands the engine what
// it does not own (the request engine, the store) through Deps.
package tasks
