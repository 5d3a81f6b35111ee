package caddymodule

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/gatewaydb"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

// The next configuration on a DSN (a reload's) shares the database the
// last one opened; a database that is not a file here journals under
// Caddy's data directory; the last release closes it.
func TestOpenDatabaseShared(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	core, logs := observer.New(zap.InfoLevel)
	dbc := DatabaseConfig{Driver: "sqlite", DSN: ":memory:"}
	a, err := openDatabase(dbc, zap.New(core), time.Hour, time.Hour, billing.WriterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := openDatabase(dbc, zap.New(core), time.Hour, time.Hour, billing.WriterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Database != b.Database {
		t.Error("a reload on the same database opened another")
	}
	opened := logs.FilterMessage("database opened").All()
	if len(opened) != 1 {
		t.Fatalf("the database was opened %d times", len(opened))
	}
	journal, _ := opened[0].ContextMap()["usage_journal"].(string)
	if dir := filepath.Join(caddy.AppDataDir(), "gateway"); filepath.Dir(journal) != dir {
		t.Errorf("journal %q is not in %q", journal, dir)
	}
	if err := a.release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Store.Ping(context.Background()); err != nil {
		t.Fatalf("the store closed while a configuration still holds it: %v", err)
	}
	if err := b.release(); err != nil {
		t.Fatal(err)
	}
	if err := gatewaydb.AwaitClosed(dbc.Driver, dbc.DSN); err != nil {
		t.Fatal(err)
	}
	if err := a.Store.Ping(context.Background()); err == nil {
		t.Error("the last release left the store open")
	}
}
