package billing

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// lockedRows is a shared database as retention sees it: rows to delete,
// limit at a time, and one lock that the instances take turns at.
type lockedRows struct {
	store.Store
	left, deletes int64
	held          bool
	heldDuring    []bool // whether the lock was held at each delete
}

func (s *lockedRows) TryLock(context.Context, string) (func(), bool, error) {
	if s.held {
		return nil, false, nil
	}
	s.held = true
	return func() { s.held = false }, true, nil
}

func (s *lockedRows) DeleteUsageBefore(_ context.Context, _ time.Time, limit int) (int64, error) {
	s.deletes++
	s.heldDuring = append(s.heldDuring, s.held)
	n := min(s.left, int64(limit))
	s.left -= n
	return n, nil
}

// On a shared database one instance sweeps at a time: a sweep that finds
// the retention lock taken deletes nothing that round; a sweep that takes
// it deletes every batch under it and gives it back at its end.
func TestRetentionSweepsUnderTheLock(t *testing.T) {
	ctx := context.Background()
	rows := &lockedRows{left: 5}
	r := &Retention{Store: rows, Keep: time.Hour, BatchSize: 2, Pause: time.Nanosecond, Log: zap.NewNop()}

	rows.held = true // another instance is sweeping
	r.sweep(ctx)
	if rows.deletes != 0 || rows.left != 5 {
		t.Fatalf("swept beside another instance: %d deletes, %d rows left", rows.deletes, rows.left)
	}

	rows.held = false
	r.sweep(ctx)
	if rows.left != 0 || rows.deletes != 4 { // 2, 2, 1, then an empty batch
		t.Fatalf("sweep with the lock: %d rows left after %d deletes", rows.left, rows.deletes)
	}
	for i, held := range rows.heldDuring {
		if !held {
			t.Fatalf("delete %d ran without the lock", i+1)
		}
	}
	if rows.held {
		t.Fatal("the lock outlived the sweep")
	}
}
