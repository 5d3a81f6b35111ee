package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// A named lock is held by one instance at a time, other names are free,
// release hands it on, and an instance that goes (its store closed, as a
// killed process's connections close) frees what it held.
func TestTryLock(t *testing.T) {
	ctx := context.Background()
	dsn := testCluster.Database(t)
	open := func() store.Locker {
		st, err := Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st.(store.Locker)
	}
	a, b := open(), open()
	try := func(l store.Locker, name string) (func(), bool) {
		t.Helper()
		release, ok, err := l.TryLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return release, ok
	}

	releaseA, ok := try(a, "retention")
	if !ok {
		t.Fatal("the first instance did not get a free lock")
	}
	if _, ok := try(b, "retention"); ok {
		t.Fatal("two instances hold the lock at once")
	}
	if _, ok := try(a, "retention"); ok {
		t.Fatal("the holder's second try got it again: a try must not nest on another connection")
	}
	releaseOther, ok := try(b, "another job")
	if !ok {
		t.Fatal("a lock of another name is taken")
	}
	releaseOther()
	releaseA()
	releaseB, ok := try(b, "retention")
	if !ok {
		t.Fatal("a released lock was not handed on")
	}

	// the holder's session ends without a release (its process killed):
	// the server frees its lock, and the late release still returns
	c := open()
	releaseB()
	releaseC, ok := try(c, "job of the dead")
	if !ok {
		t.Fatal("free lock not taken")
	}
	if _, err := a.(*Store).pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1::bigint & x'ffffffff'::bigint`,
		lockKey("job of the dead")); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if release, ok := try(a, "job of the dead"); ok {
			release()
			break
		}
		if i == 100 {
			t.Fatal("a dead session's lock was not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	releaseC()
}
