package postgres

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/caddy-model-gateway/gateway/store"
)

var _ store.Locker = (*Store)(nil)

// TryLock takes a session advisory lock on a connection of its own, held
// out of the pool until release: the lock belongs to the session, so it
// goes with the connection when the instance dies.
func (s *Store) TryLock(ctx context.Context, name string) (release func(), ok bool, err error) {
	key := lockKey(name)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: connect: %w", name, err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		// a connection that cannot unlock is closed, which unlocks it:
		// back in the pool it would hold the lock for good
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			conn.Conn().Close(context.Background())
		}
		conn.Release()
	}, true, nil
}

// lockKey is the advisory lock key of a named lock: a hash in a namespace
// of the gateway's own, apart from the migration lock.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("gateway lock: " + name))
	return int64(h.Sum64())
}
