package store

import "context"

// Locker is offered by a store that several gateway instances share
// (PostgreSQL): a lock by name for periodic work that must run on one
// instance at a time, such as usage retention. A store on one machine
// (SQLite) does not offer it, and its one process does the work.
//
// A lock lives as long as the holder's connection to the store: a killed
// instance's locks are free as soon as the server sees its connection go.
// The same connection going while the holder works frees the lock too, so
// work under it must stay safe to repeat (retention's deletes are).
type Locker interface {
	// TryLock takes the lock name without waiting: ok is false when
	// another holder has it. When ok, release gives it back and must be
	// called once, before the store is closed (a held lock keeps its
	// connection, which Close waits for).
	TryLock(ctx context.Context, name string) (release func(), ok bool, err error)
}
