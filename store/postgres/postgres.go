// Package postgres is the gateway's shared store: store.Store on a
// PostgreSQL server through github.com/jackc/pgx/v5, so that several
// gateway instances on one database behave as one gateway. It registers
// itself as the "postgres" driver with store.Register.
//
// The data source name is a postgres:// URL or a key=value DSN, as libpq
// and pgx read them. The pool holds at most pool_max_conns connections (a
// DSN parameter: ?pool_max_conns=20, or pool_max_conns=20); without it,
// pgx's default, the larger of 4 and the machine's CPU count. Every
// instance holds up to that many, so the server's max_connections must
// cover the instances times pool_max_conns, plus the CLI and backups.
//
// Correct across instances: every money and quota write is one
// conditional statement, or a transaction that first locks the rows it
// reads (SELECT ... FOR NO KEY UPDATE), and transactions that lock several
// rows lock them in one order (tasks, then users by id, then tokens by id,
// then the daily totals), so two instances' writes wait for each other
// instead of deadlocking. Task leases are taken with FOR UPDATE SKIP
// LOCKED. Schema migrations run under an advisory lock.
//
// All of the gateway's SQL lives in store/; nothing outside it may import
// a SQL driver. The schema comes from the numbered files in migrations/,
// embedded in the binary, the same steps as store/sqlite's.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	store.Register("postgres", Open)
}

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// credited hears the credits announced on the identity channel
	// (OnCredit); nil until a ledger asks
	credited atomic.Pointer[func(token bool, id int64)]
	// runtimeHook hears runtime configuration changes announced there
	runtimeHook atomic.Pointer[func()]
	// stopPartitions ends keepPartitions, which closes kept when it has
	stopPartitions context.CancelFunc
	kept           chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at dsn and brings its schema up to date.
func Open(dsn string) (store.Store, error) {
	if dsn == "" {
		return nil, errors.New("postgres: empty data source name")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message would repeat the DSN, password and all
		return nil, errors.New("postgres: the data source name is not a postgres:// URL or key=value DSN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate(ctx, pool, migrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	if err := fillNameKeys(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	s := &Store{pool: pool, kept: make(chan struct{})}
	// A failure leaves the rows of a missing day to the default partition
	// and is tried again within the hour; a server that refuses writes is
	// Ping's to report, not a reason not to start.
	_ = s.makeDays(ctx, time.Now())
	var keepCtx context.Context
	keepCtx, s.stopPartitions = context.WithCancel(context.Background())
	go s.keepPartitions(keepCtx)
	return s, nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.stopPartitions()
	<-s.kept
	s.pool.Close()
	return nil
}

// querier is the pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// txAttempts bounds how often inTx runs a transaction the server aborted
// for a deadlock or a serialization failure. The lock order above keeps
// deadlocks out; the retry keeps a missed case from failing a caller.
const txAttempts = 3

// inTx runs fn in a transaction and commits it if fn returns nil. fn may
// run more than once, so it must set what it returns afresh every time.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || attempt == txAttempts || !retryable(err) {
			return err
		}
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// sqlErr translates constraint failures into the store's errors, keeping
// the server's message for the log.
func sqlErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case "23503": // foreign_key_violation
			return fmt.Errorf("referenced row %w: %w", store.ErrNotFound, err)
		}
	}
	return err
}

// overflowed reports a bigint result out of range.
func overflowed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22003" // numeric_value_out_of_range
}

// mustAffect reports ErrNotFound (as what) when a write matched no row.
func mustAffect(tag pgconn.CommandTag, what string) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

// notFound maps pgx.ErrNoRows to ErrNotFound (as what).
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Times are stored as unix milliseconds, as the SQLite store keeps them;
// the zero time.Time is NULL.

// now is the current time at the precision the database keeps, so that a
// value the store fills in equals what a later read returns.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}

// nullString stores "" as NULL, for columns where NULL keeps UNIQUE from
// counting empty values as duplicates.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// collect is store.Collect, closing the rows of a query that ran.
func collect[T any](rows pgx.Rows, err error, scan func(store.RowScanner) (T, error), format string, args ...any) ([]T, error) {
	if err == nil {
		defer rows.Close()
	}
	return store.Collect(rows, err, scan, format, args...)
}

// Saturating arithmetic on bigint columns, in numeric so that the sum
// itself cannot overflow: a charge past the int64 range pins the column at
// its end rather than failing the batch it is in, as the SQLite store does.
const (
	minInt64 = "-9223372036854775808"
	maxInt64 = "9223372036854775807"
)

func subSat(col, arg string) string {
	return "GREATEST(" + col + "::numeric - " + arg + "::bigint, " + minInt64 + ")::bigint"
}

func addSat(col, arg string) string {
	return "LEAST(" + col + "::numeric + " + arg + "::bigint, " + maxInt64 + ")::bigint"
}
