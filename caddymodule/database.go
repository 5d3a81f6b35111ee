package caddymodule

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

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/health"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/metrics"
	"github.com/caddy-model-gateway/gateway/store"
)

// databases holds one open store per DSN across config reloads, with what
// must live exactly as long as it: the key cache, the quota ledger and the
// usage writer. A reload provisions a new app that finds the same entry, so
// reservations in flight and queued usage rows carry over untouched.
var databases = caddy.NewUsagePool()

// closing holds, per database key, a channel closed when the database's
// last user has drained and closed it. A reload that comes back to a
// database still draining waits for it, so two ledgers never admit against
// one balance.
var (
	closingMu sync.Mutex
	closing   = map[string]chan struct{}{}
)

type database struct {
	key   string
	store store.Store
	keys  *keys.Cache
	// authFailures counts failed authentications by client address
	authFailures *keys.LRU
	ledger       *billing.Ledger
	spend        *billing.Spend // spending windows, as long as the ledger
	limiter      *billing.Limiter
	writer       *billing.Writer
	log          *zap.Logger
	stop         context.CancelFunc
	wg           sync.WaitGroup

	// metrics and health last as long as the entry, across reloads
	metrics *metrics.Database
	health  health.StoreProbe
	// active counts requests from gateway_auth to their usage row: the
	// store is not closed under them; closing refuses new ones (tryEnter)
	// once close found none
	active  atomic.Int64
	closing atomic.Bool
	// apps hear of runtime configuration changes other instances make
	appsMu sync.Mutex
	apps   map[*App]bool
}

// runtimeFeed is a store that announces runtime configuration changes
// (PostgreSQL; a SQLite file has one gateway).
type runtimeFeed interface{ OnRuntimeChange(func()) }

// watchRuntime has a hear of runtime configuration changes until
// unwatchRuntime.
func (db *database) watchRuntime(a *App) {
	db.appsMu.Lock()
	defer db.appsMu.Unlock()
	if db.apps == nil {
		db.apps = map[*App]bool{}
	}
	db.apps[a] = true
}

func (db *database) unwatchRuntime(a *App) {
	db.appsMu.Lock()
	defer db.appsMu.Unlock()
	delete(db.apps, a)
}

// runtimeChanged tells every app; it does not block.
func (db *database) runtimeChanged() {
	db.appsMu.Lock()
	defer db.appsMu.Unlock()
	for a := range db.apps {
		a.runtimeChanged()
	}
}

// enter and leave bracket a request's use of the database; enter only
// within a request that tryEnter let in (gateway_auth's), which holds the
// database open.
func (db *database) enter() { db.active.Add(1) }
func (db *database) leave() { db.active.Add(-1) }

// tryEnter is enter for a request's first use of the database: false once
// close has found it idle and is closing the store. close sets closing and
// then reads the count, tryEnter counts and then reads closing, so one of
// them sees the other.
func (db *database) tryEnter() bool {
	db.active.Add(1)
	if db.closing.Load() {
		db.active.Add(-1)
		return false
	}
	return true
}

func openDatabase(cfg DatabaseConfig, log *zap.Logger, cacheTTL, leaseTTL time.Duration, wcfg billing.WriterConfig) (*database, error) {
	key := store.DatabaseKey(cfg.Driver, cfg.DSN)
	closingMu.Lock()
	wait := closing[key]
	closingMu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("the %s database %q is still draining from the previous configuration", cfg.Driver, store.RedactDSN(cfg.Driver, cfg.DSN))
		}
	}
	val, _, err := databases.LoadOrNew(key, func() (caddy.Destructor, error) {
		st, err := store.Open(cfg.Driver, cfg.DSN)
		if err != nil {
			return nil, fmt.Errorf("opening %s database %q: %w", cfg.Driver, store.RedactDSN(cfg.Driver, cfg.DSN), err)
		}
		if err := account.BootstrapRoot(context.Background(), st, log, os.Stderr); err != nil {
			st.Close()
			return nil, err
		}
		db := &database{key: key, store: st, ledger: leasedLedger(st, log, cacheTTL, leaseTTL), limiter: sharedLimiter(st, log, cacheTTL), log: log}
		db.keys = keys.NewCache(st, cacheTTL)
		db.spend = &billing.Spend{Load: st.WindowSpend, Refresh: cacheTTL}
		if cfg.Driver != "sqlite" {
			// instances share the database: each admits within room it
			// claimed. A SQLite file has one gateway, whose count is exact
			// alone, and claiming would put a write on the request's path.
			db.spend.Claims = st
		}
		db.authFailures = keys.NewLRU(keys.MaxUnknownKeys)
		if wcfg.Journal == "" {
			wcfg.Journal = defaultJournal(cfg)
		}
		db.writer = billing.NewWriter(st, db.ledger, log.Named("usage"), wcfg)
		db.metrics = metrics.NewDatabase(db.writer, db.ledger, db.keys)
		ctx, cancel := context.WithCancel(context.Background())
		db.stop = cancel
		db.wg.Add(1)
		go db.maintain(ctx, cacheTTL)
		db.wg.Add(1)
		go func() { defer db.wg.Done(); db.ledger.RunLeases(ctx) }()
		db.wg.Add(1)
		go func() { defer db.wg.Done(); db.limiter.RunSync(ctx) }()
		if feed, ok := st.(billing.CreditFeed); ok { // heard on the connection the key cache follows
			feed.OnCredit(db.ledger.Credited)
		}
		if feed, ok := st.(runtimeFeed); ok {
			feed.OnRuntimeChange(db.runtimeChanged)
		}
		if feed, ok := st.(keys.ChangeFeed); ok { // PostgreSQL: changes from other instances at once
			db.wg.Add(1)
			go func() {
				defer db.wg.Done()
				db.keys.Follow(ctx, feed, func(err error) {
					log.Warn("not hearing of key and user changes from other instances; until this is back, they apply within token_cache_ttl", zap.Error(err))
				})
			}()
		}
		log.Info("database opened", zap.String("driver", cfg.Driver), zap.String("dsn", store.RedactDSN(cfg.Driver, cfg.DSN)),
			zap.String("usage_journal", wcfg.Journal))
		return db, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(*database), nil
}

// maintain keeps the ledger in step with changes other processes make to
// the store, drops cache entries nobody uses and checks that the store
// takes writes, for the health handler.
func (db *database) maintain(ctx context.Context, every time.Duration) {
	defer db.wg.Done()
	db.probe(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			db.ledger.Refresh(ctx, db.store, every, 10*time.Minute)
			db.keys.Sweep()
			db.probe(ctx)
			db.limiter.Sweep(time.Now())
		}
	}
}

// quiesce returns once no request has been in the database for quiet and
// none can enter any more (tryEnter refuses them). Quiet is counted in
// polls as well as in time: a process stalled (a loaded machine, the -race
// build) finds quiet's time gone at its first poll after the stall, before
// a request that was on its way in has run again; each poll lets it run.
func (db *database) quiesce(quiet time.Duration) {
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

func (db *database) release() error {
	_, err := databases.Delete(db.key)
	return err
}

// Destruct runs when the last app using the database is cleaned up: once
// the requests still running on it have finished (on a reload, Caddy cleans
// the old configuration up while its requests drain), it records every
// queued usage row, then closes the store. On a reload that happens in the
// background; when the process exits, before it does.
func (db *database) Destruct() error {
	done := make(chan struct{})
	closingMu.Lock()
	closing[db.key] = done
	closingMu.Unlock()
	if caddy.Exiting() {
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
func (db *database) close(done chan struct{}, quiet time.Duration) error {
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
	db.writer.Close()
	if err := db.ledger.ReleaseLeases(); err != nil {
		db.log.Warn("giving quota leases back: they come back when they run out", zap.Error(err))
	}
	return db.store.Close()
}

// defaultJournal is where unwritten usage rows go: beside a SQLite file;
// for a database that is not a file here (a server, or SQLite in memory),
// in Caddy's data directory, one journal per database, so that rows held
// for one are never replayed into another. Instances on one machine need
// journals of their own: each sets `usage { journal }` or its own
// XDG_DATA_HOME.
func defaultJournal(cfg DatabaseConfig) string {
	if cfg.Driver == "sqlite" && cfg.DSN != ":memory:" {
		p := strings.TrimPrefix(cfg.DSN, "file:")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		if p != "" && p != ":memory:" {
			return p + ".usage-journal"
		}
	}
	// named by the database without its password: a file name is no
	// place for a hash an attacker could test passwords against
	sum := sha256.Sum256([]byte(cfg.Driver + ":" + store.RedactDSN(cfg.Driver, cfg.DSN)))
	return filepath.Join(caddy.AppDataDir(), "gateway", cfg.Driver+"-"+hex.EncodeToString(sum[:6])+".usage-journal")
}

var _ caddy.Destructor = (*database)(nil)

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
