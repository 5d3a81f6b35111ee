package caddymodule

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// oneLock is a store.Locker with one lock, as a shared database has.
type oneLock struct{ held bool }

func (l *oneLock) TryLock(context.Context, string) (func(), bool, error) {
	if l.held {
		return nil, false, nil
	}
	l.held = true
	return func() { l.held = false }, true, nil
}

// oldRows is a store with rows to delete, limit at a time.
type oldRows struct {
	store.Store
	left, deletes int64
}

func (s *oldRows) DeleteUsageBefore(_ context.Context, _ time.Time, limit int) (int64, error) {
	s.deletes++
	n := min(s.left, int64(limit))
	s.left -= n
	return n, nil
}

// On a shared database one instance sweeps at a time: the sweep's first
// delete takes the lock, another instance's sweep deletes nothing while it
// is held, and the sweep's end (or Stop) hands it on.
func TestSweepLock(t *testing.T) {
	ctx := context.Background()
	rows := &oldRows{left: 3}
	lock := &oneLock{}
	a := &sweepLock{Store: rows, locker: lock, log: zap.NewNop()}
	b := &sweepLock{Store: rows, locker: lock, log: zap.NewNop()}
	del := func(l *sweepLock) int64 {
		t.Helper()
		n, err := l.DeleteUsageBefore(ctx, time.Now(), 2)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := del(a); n != 2 || !lock.held {
		t.Fatalf("a's first batch: %d rows, lock held %v", n, lock.held)
	}
	if n := del(b); n != 0 || rows.deletes != 1 {
		t.Fatalf("b swept beside a: %d rows, %d deletes", n, rows.deletes)
	}
	if n := del(a); n != 1 || !lock.held {
		t.Fatalf("a's second batch: %d rows, lock held %v", n, lock.held)
	}
	if n := del(a); n != 0 || lock.held {
		t.Fatalf("a's sweep ended with %d rows and the lock held %v", n, lock.held)
	}
	rows.left = 5
	if n := del(b); n != 2 || !lock.held {
		t.Fatalf("b's turn: %d rows, lock held %v", n, lock.held)
	}
	// stopped mid-sweep: Stop drops what the sweep held
	b.drop()
	if lock.held {
		t.Fatal("the lock outlived the stopped sweep")
	}
}
