package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/gatewaydb"
	"github.com/caddy-model-gateway/gateway/store"
)

// databases holds one open database per DSN across config reloads
// (gatewaydb.Database: the store with its key cache, quota ledger and usage
// writer). A reload provisions a new app that finds the same entry, so
// reservations in flight and queued usage rows carry over untouched; the
// last app's release drains and closes it (its Destruct).
var databases = caddy.NewUsagePool()

// database is an app's hold on its shared gatewaydb.Database: the key
// it holds it by in databases, for release.
type database struct {
	*gatewaydb.Database
	key string
}

// openDatabase finds the database cfg names in databases, or opens it
// there; one a reload dropped is waited for until it has closed. Caddy
// says whether the process is exiting and where its data directory is.
func openDatabase(cfg DatabaseConfig, log *zap.Logger, cacheTTL, leaseTTL time.Duration, wcfg billing.WriterConfig) (*database, error) {
	if err := gatewaydb.AwaitClosed(cfg.Driver, cfg.DSN); err != nil {
		return nil, err
	}
	key := store.DatabaseKey(cfg.Driver, cfg.DSN)
	val, _, err := databases.LoadOrNew(key, func() (caddy.Destructor, error) {
		db, err := gatewaydb.Open(gatewaydb.Config{Driver: cfg.Driver, DSN: cfg.DSN, CacheTTL: cacheTTL, LeaseTTL: leaseTTL,
			Usage: wcfg, DataDir: caddy.AppDataDir(), Exiting: caddy.Exiting, Log: log})
		if err != nil {
			return nil, err
		}
		return db, nil
	})
	if err != nil {
		return nil, err
	}
	db := val.(*gatewaydb.Database)
	return &database{Database: db, key: key}, nil
}

// release gives the app's hold back: the last one closes the database.
func (db *database) release() error {
	_, err := databases.Delete(db.key)
	return err
}

var _ caddy.Destructor = (*gatewaydb.Database)(nil)
