package gatewaydb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

func openTemp(t *testing.T, exiting bool) (*Database, string) {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "gateway.db")
	db, err := Open(Config{Driver: "sqlite", DSN: dsn, CacheTTL: time.Hour, LeaseTTL: time.Hour,
		DataDir: t.TempDir(), Exiting: func() bool { return exiting }, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return db, dsn
}

// A database a reload dropped closes in the background once its requests
// have left, and a configuration coming back to it meanwhile waits for
// that (AwaitClosed) rather than opening a second ledger on its balances.
func TestReopenWaitsForTheDroppedDatabase(t *testing.T) {
	db, dsn := openTemp(t, false)
	if err := AwaitClosed("sqlite", dsn); err != nil {
		t.Fatalf("an open database is not closing: %v", err)
	}
	if !db.TryEnter() {
		t.Fatal("an open database refused a request")
	}
	if err := db.Destruct(); err != nil {
		t.Fatal(err)
	}
	closingMu.Lock()
	draining := closing[store.DatabaseKey("sqlite", dsn)]
	closingMu.Unlock()
	if draining == nil {
		t.Fatal("a dropped database with a request in it is not marked as closing")
	}
	if err := db.Store.Ping(context.Background()); err != nil {
		t.Fatalf("the store closed under a request: %v", err)
	}
	awaited := make(chan error, 1)
	go func() { awaited <- AwaitClosed("sqlite", dsn) }()
	db.Leave()
	if err := <-awaited; err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Ping(context.Background()); err == nil {
		t.Error("AwaitClosed returned before the store was closed")
	}
	if db.TryEnter() {
		t.Error("a closed database let a request in")
	}
}

// When the process exits, Destruct closes the store before it returns.
func TestDestructOnExitCloses(t *testing.T) {
	db, dsn := openTemp(t, true)
	if err := db.Destruct(); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Ping(context.Background()); err == nil {
		t.Error("the store is still open after Destruct on exit")
	}
	closingMu.Lock()
	defer closingMu.Unlock()
	if closing[store.DatabaseKey("sqlite", dsn)] != nil {
		t.Error("a closed database is still marked as closing")
	}
}

// Runtime configuration changes reach the watchers until they unwatch.
func TestRuntimeWatchers(t *testing.T) {
	db := &Database{}
	heard := map[string]int{}
	a, b := new(int), new(int)
	db.WatchRuntime(a, func() { heard["a"]++ })
	db.WatchRuntime(b, func() { heard["b"]++ })
	db.runtimeChanged()
	db.UnwatchRuntime(a)
	db.runtimeChanged()
	if heard["a"] != 1 || heard["b"] != 2 {
		t.Errorf("heard %v, want a once and b twice", heard)
	}
}
