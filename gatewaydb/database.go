// Package gatewaydb is a gateway database's life: the store one DSN names,
// with what must live exactly as long as it (the key cache, the quota
// ledger and its leases, the shared rate limiter, the spending windows,
// the usage writer and its journal, the store's health probe and the
// database's metrics), its maintenance, and its close once the last
// configuration using it is gone and its requests have drained.
//
// It must not import Caddy: caddymodule keeps one Database per DSN across
// config reloads in a caddy.UsagePool (a Database is its caddy.Destructor)
// and passes in what only Caddy knows, whether the process is exiting and
// its data directory.
package gatewaydb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/health"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/metrics"
	"github.com/caddy-model-gateway/gateway/store"
)

// closing holds, per database key, a channel closed when the database's
// last user has drained and closed it. A reload that comes back to a
// database still draining waits for it (AwaitClosed), so two ledgers
// never admit against one balance.
var (
	closingMu sync.Mutex
	closing   = map[string]chan struct{}{}
)

// Config is how a database is opened. The first configuration to open a
// database sets it; a reload that finds it open shares it as it is.
type Config struct {
	Driver, DSN string
	// CacheTTL is token_cache_ttl: how often the key cache, the ledger's
	// balances and leases and the limiter's shared use are refreshed, and
	// the store's write probe runs.
	CacheTTL time.Duration
	// LeaseTTL is how long a slice of a balance leased from the store
	// lives (billing.LeaseConfig.TTL).
	LeaseTTL time.Duration
	// Usage tunes the usage writer; an empty Journal is DefaultJournal's.
	Usage billing.WriterConfig
	// DataDir is the server's data directory, where the journal of a
	// database that is not a file here goes.
	DataDir string
	// Exiting says whether the process is exiting: the database then
	// closes before Destruct returns rather than in the background.
	Exiting func() bool
	Log     *zap.Logger
}

// Database is one open store and what lives as long as it. Its exported
// fields are set by Open and never change.
type Database struct {
	Store store.Store
	Keys  *keys.Cache
	// AuthFailures counts failed authentications by client address
	AuthFailures *keys.LRU
	Ledger       *billing.Ledger
	Spend        *billing.Spend // spending windows, as long as the ledger
	Limiter      *billing.Limiter
	Writer       *billing.Writer
	// Metrics and Health last as long as the database, across reloads
	Metrics *metrics.Database
	Health  health.StoreProbe

	key     string
	exiting func() bool
	log     *zap.Logger
	stop    context.CancelFunc
	wg      sync.WaitGroup

	// active counts requests from gateway_auth to their usage row: the
	// store is not closed under them; closing refuses new ones (TryEnter)
	// once close found none
	active  atomic.Int64
	closing atomic.Bool
	// watchers hear of runtime configuration changes other instances make
	watchersMu sync.Mutex
	watchers   map[any]func()
}

// runtimeFeed is a store that announces runtime configuration changes
// (PostgreSQL; a SQLite file has one gateway).
type runtimeFeed interface{ OnRuntimeChange(func()) }

// WatchRuntime has f hear of runtime configuration changes until
// UnwatchRuntime(owner).
func (db *Database) WatchRuntime(owner any, f func()) {
	db.watchersMu.Lock()
	defer db.watchersMu.Unlock()
	if db.watchers == nil {
		db.watchers = map[any]func(){}
	}
	db.watchers[owner] = f
}

// UnwatchRuntime ends what WatchRuntime(owner) began.
func (db *Database) UnwatchRuntime(owner any) {
	db.watchersMu.Lock()
	defer db.watchersMu.Unlock()
	delete(db.watchers, owner)
}

// runtimeChanged tells every watcher; it does not block.
func (db *Database) runtimeChanged() {
	db.watchersMu.Lock()
	defer db.watchersMu.Unlock()
	for _, f := range db.watchers {
		f()
	}
}

// Enter and Leave bracket a request's use of the database; Enter only
// within a request that TryEnter let in (gateway_auth's), which holds the
// database open.
func (db *Database) Enter() { db.active.Add(1) }
func (db *Database) Leave() { db.active.Add(-1) }

// TryEnter is Enter for a request's first use of the database: false once
// close has found it idle and is closing the store. close sets closing and
// then reads the count, TryEnter counts and then reads closing, so one of
// them sees the other.
func (db *Database) TryEnter() bool {
	db.active.Add(1)
	if db.closing.Load() {
		db.active.Add(-1)
		return false
	}
	return true
}

// AwaitClosed returns once the database that driver and dsn name is not
// closing (a reload dropped it and its requests are draining), or an
// error after a minute.
func AwaitClosed(driver, dsn string) error {
	closingMu.Lock()
	wait := closing[store.DatabaseKey(driver, dsn)]
	closingMu.Unlock()
	if wait == nil {
		return nil
	}
	select {
	case <-wait:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the %s database %q is still draining from the previous configuration", driver, store.RedactDSN(driver, dsn))
	}
}

// Open opens the store cfg names, makes the root account on a new one,
// and starts the database's maintenance, lease renewals, limiter syncs and
// (on a store that announces them) its hearing of changes other instances
// make. The caller keeps one per DSN (AwaitClosed first) and calls
// Destruct when its last user is gone.
func Open(cfg Config) (*Database, error) {
	log := cfg.Log
	// a bad GATEWAY_PASSWORD_COST stops the start before the database opens
	if _, err := account.PasswordCost(); err != nil {
		return nil, err
	}
	if w := account.LowCostWarning(); w != "" {
		log.Warn(w)
	}
	st, err := store.Open(cfg.Driver, cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("opening %s database %q: %w", cfg.Driver, store.RedactDSN(cfg.Driver, cfg.DSN), err)
	}
	if err := account.BootstrapRoot(context.Background(), st, log, os.Stderr); err != nil {
		st.Close()
		return nil, err
	}
	db := &Database{key: store.DatabaseKey(cfg.Driver, cfg.DSN), exiting: cfg.Exiting, Store: st,
		Ledger: leasedLedger(st, log, cfg.CacheTTL, cfg.LeaseTTL), Limiter: sharedLimiter(st, log, cfg.CacheTTL), log: log}
	db.Keys = keys.NewCache(st, cfg.CacheTTL)
	db.Spend = &billing.Spend{Load: st.WindowSpend, Refresh: cfg.CacheTTL}
	if cfg.Driver != "sqlite" {
		// instances share the database: each admits within room it
		// claimed. A SQLite file has one gateway, whose count is exact
		// alone, and claiming would put a write on the request's path.
		db.Spend.Claims = st
	}
	db.AuthFailures = keys.NewLRU(keys.MaxUnknownKeys)
	wcfg := cfg.Usage
	if wcfg.Journal == "" {
		wcfg.Journal = DefaultJournal(cfg.Driver, cfg.DSN, cfg.DataDir)
	}
	db.Writer = billing.NewWriter(st, db.Ledger, log.Named("usage"), wcfg)
	db.Metrics = metrics.NewDatabase(db.Writer, db.Ledger, db.Keys)
	ctx, cancel := context.WithCancel(context.Background())
	db.stop = cancel
	db.wg.Add(1)
	go db.maintain(ctx, cfg.CacheTTL)
	db.wg.Add(1)
	go func() { defer db.wg.Done(); db.Ledger.RunLeases(ctx) }()
	db.wg.Add(1)
	go func() { defer db.wg.Done(); db.Limiter.RunSync(ctx) }()
	if feed, ok := st.(billing.CreditFeed); ok { // heard on the connection the key cache follows
		feed.OnCredit(db.Ledger.Credited)
	}
	if feed, ok := st.(runtimeFeed); ok {
		feed.OnRuntimeChange(db.runtimeChanged)
	}
	if feed, ok := st.(keys.ChangeFeed); ok { // PostgreSQL: changes from other instances at once
		db.wg.Add(1)
		go func() {
			defer db.wg.Done()
			db.Keys.Follow(ctx, feed, func(err error) {
				log.Warn("not hearing of key and user changes from other instances; until this is back, they apply within token_cache_ttl", zap.Error(err))
			})
		}()
	}
	log.Info("database opened", zap.String("driver", cfg.Driver), zap.String("dsn", store.RedactDSN(cfg.Driver, cfg.DSN)),
		zap.String("usage_journal", wcfg.Journal))
	return db, nil
}

// maintain keeps the ledger in step with changes other processes make to
// the store, drops cache entries nobody uses and checks that the store
// takes writes, for the health handler.
func (db *Database) maintain(ctx context.Context, every time.Duration) {
	defer db.wg.Done()
	db.probe(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			db.Ledger.Refresh(ctx, db.Store, every, 10*time.Minute)
			db.Keys.Sweep()
			db.probe(ctx)
			db.Limiter.Sweep(time.Now())
		}
	}
}

// probe checks that the store takes writes, for the health answer.
func (db *Database) probe(ctx context.Context) { db.Health.Probe(ctx, db.Store.Ping, db.log) }

// quiesce returns once no request has been in the database for quiet and
// none can enter any more (TryEnter refuses them). Quiet is counted in
// polls as well as in time: a process stalled (a loaded machine, the -race
// build) finds quiet's time gone at its first poll after the stall, before
// a request that was on its way in has run again; each poll lets it run.
func (db *Database) quiesce(quiet time.Duration) {
	const poll = 10 * time.Millisecond
	for idleSince, idle := time.Now(), time.Duration(0); ; time.Sleep(poll) {
		if db.active.Load() > 0 {
			idleSince, idle = time.Now(), 0
		} else if time.Since(idleSince) >= quiet && idle >= quiet {
			db.closing.Store(true)
			if db.active.Load() == 0 {
				return
			}
			// one came in meanwhile: it is served here, and waited for
			db.closing.Store(false)
			idleSince, idle = time.Now(), 0
		} else {
			idle += poll
		}
	}
}

// Destruct runs when the last configuration using the database is cleaned
// up: once the requests still running on it have finished (on a reload,
// Caddy cleans the old configuration up while its requests drain), it
// records every queued usage row, then closes the store. On a reload that
// happens in the background; when the process exits, before it does.
func (db *Database) Destruct() error {
	done := make(chan struct{})
	closingMu.Lock()
	closing[db.key] = done
	closingMu.Unlock()
	if db.exiting != nil && db.exiting() {
		return db.close(done, 0)
	}
	go func() {
		if err := db.close(done, drainQuiet); err != nil {
			db.log.Error("closing the database", zap.Error(err))
		}
	}()
	return nil
}

// drainQuiet is how long a database dropped by a reload must have had no
// request in it before it closes. Caddy cleans the old configuration up
// while its servers drain, so a request of the old configuration may still
// be on its way to enter (read by the old server, not yet in gateway_auth,
// where it is counted) when the count first reads zero; its row would then
// meet a closed store and wait in the journal for the next start on that
// database.
const drainQuiet = 250 * time.Millisecond

// close waits until no request has been in the database for quiet
// (quiesce), then records every queued row and closes the store.
func (db *Database) close(done chan struct{}, quiet time.Duration) error {
	db.quiesce(quiet)
	defer func() {
		closingMu.Lock()
		if closing[db.key] == done {
			delete(closing, db.key)
		}
		closingMu.Unlock()
		close(done)
	}()
	db.stop()
	db.wg.Wait()
	db.Writer.Close()
	if err := db.Ledger.ReleaseLeases(); err != nil {
		db.log.Warn("giving quota leases back: they come back when they run out", zap.Error(err))
	}
	return db.Store.Close()
}

// DefaultJournal is where unwritten usage rows go: beside a SQLite file;
// for a database that is not a file here (a server, or SQLite in memory),
// in the data directory dataDir, one journal per database, so that rows
// held for one are never replayed into another. Instances on one machine
// need journals of their own: each sets `usage { journal }` or its own
// data directory (XDG_DATA_HOME).
func DefaultJournal(driver, dsn, dataDir string) string {
	if driver == "sqlite" && dsn != ":memory:" {
		p := strings.TrimPrefix(dsn, "file:")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		if p != "" && p != ":memory:" {
			return p + ".usage-journal"
		}
	}
	// named by the database without its password: a file name is no
	// place for a hash an attacker could test passwords against
	sum := sha256.Sum256([]byte(driver + ":" + store.RedactDSN(driver, dsn)))
	return filepath.Join(dataDir, "gateway", driver+"-"+hex.EncodeToString(sum[:6])+".usage-journal")
}

// DefaultFiles is where the Files and Batch APIs keep files' bytes: a
// directory "files" beside a SQLite file; for a database that is not a
// file here, in the data directory dataDir (several instances on one
// database need it shared).
func DefaultFiles(driver, dsn, dataDir string) string {
	if driver == "sqlite" {
		path := strings.TrimPrefix(dsn, "file:")
		path, _, _ = strings.Cut(path, "?")
		if path != "" && path != ":memory:" {
			return filepath.Join(filepath.Dir(path), "files")
		}
	}
	return filepath.Join(dataDir, "gateway", "files")
}

// leasedLedger is a database's quota ledger: it admits against slices of
// the balances leased from the store, so that gateway instances sharing
// the database never spend the same unit (billing/lease.go). Leases are
// renewed as often as the key cache is refreshed, so that a balance
// changed by another process takes effect as soon as a key's change does,
// and live lease_ttl (twelve renewals, a minute, by default): a killed
// instance's slices come back then.
func leasedLedger(st store.Store, log *zap.Logger, renew, ttl time.Duration) *billing.Ledger {
	return billing.NewLeasedLedger(st, billing.LeaseConfig{Renew: renew, TTL: ttl, Log: log.Named("leases")})
}

// sharedLimiter is a database's rate limiter: the instances sharing the
// database hold each key's and user's limits in sum, syncing their use as
// often as the key cache is refreshed (billing/ratesharing.go).
func sharedLimiter(st store.Store, log *zap.Logger, sync time.Duration) *billing.Limiter {
	return billing.NewSharedLimiter(st, billing.ShareConfig{Sync: sync, Log: log.Named("limits")})
}
