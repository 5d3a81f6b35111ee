// Package sqlite is the gateway's embedded store: store.Store on a single
// SQLite file through database/sql and github.com/mattn/go-sqlite3 (cgo).
// It registers itself as the "sqlite" driver with store.Register.
//
// All of the gateway's SQL lives in this package (and, later, in its
// PostgreSQL sibling); nothing outside store/ may import a SQL driver. The
// schema comes from the numbered files in migrations/, embedded in the binary.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	store.Register("sqlite", Open)
}

// Store is a store.Store on one SQLite file.
//
// It holds two pools on the same file: a single-connection writer, so writes
// queue in Go instead of racing for SQLite's one write lock (which is what
// turns into "database is locked"), and a pool of query-only readers, which
// WAL mode lets run alongside the writer.
type Store struct {
	w *sql.DB // exactly one connection; every write goes here
	r *sql.DB // readers; the same *sql.DB as w for ":memory:"
	// days are the usage day tables known to exist (usagedays.go)
	days dayTables
	// blooms are the upstream id filters the next batch may extend
	// (upstreamblooms.go)
	blooms openBlooms
	// legacyRows is set while usage_logs may hold rows of before the day
	// tables, whose row keys a new row must not repeat
	legacyRows atomic.Bool
	// usageTableSQL is usage_logs' CREATE TABLE, the day tables' pattern
	usageTableSQL string
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database at dsn and brings its
// schema up to date. dsn is a file path, whose parent directory is created
// if missing; a "file:" URI, passed through with the gateway's parameters
// added; or ":memory:", a private in-memory database for tests.
func Open(dsn string) (store.Store, error) {
	if dsn == "" {
		return nil, errors.New("sqlite: empty data source name")
	}
	if dsn == ":memory:" {
		// Every connection to ":memory:" is a new database, so reads must
		// share the one writer connection.
		db, err := sql.Open("sqlite3", "file::memory:?"+params(true))
		if err != nil {
			return nil, fmt.Errorf("sqlite: open in-memory database: %w", err)
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
		if err := migrate(context.Background(), db, migrations); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: in-memory database: %w", err)
		}
		if err := fillNameKeys(context.Background(), db); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: in-memory database: %w", err)
		}
		st, err := newStore(db, db)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: in-memory database: %w", err)
		}
		return st, nil
	}

	uri, err := fileURI(dsn)
	if err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite3", withParams(uri, params(true)))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)

	// Migrate before the readers open, so the file is already in WAL mode
	// and has its schema when they first look.
	if err := migrate(context.Background(), w, migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", dsn, err)
	}
	if err := fillNameKeys(context.Background(), w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", dsn, err)
	}

	r, err := sql.Open("sqlite3", withParams(uri, params(false)))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", dsn, err)
	}
	n := max(4, runtime.NumCPU())
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.Ping(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", dsn, err)
	}
	st, err := newStore(w, r)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", dsn, err)
	}
	return st, nil
}

// newStore is the store over its writer and readers, knowing whether
// usage_logs still holds rows of before the day tables.
func newStore(w, r *sql.DB) (*Store, error) {
	s := &Store{w: w, r: r}
	var legacy bool
	if err := w.QueryRow(`SELECT EXISTS (SELECT 1 FROM usage_logs)`).Scan(&legacy); err != nil {
		return nil, fmt.Errorf("usage_logs: %w", err)
	}
	s.legacyRows.Store(legacy)
	// the day tables are made as usage_logs is (usagedays.go)
	if err := w.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'usage_logs'`).Scan(&s.usageTableSQL); err != nil {
		return nil, fmt.Errorf("usage_logs: %w", err)
	}
	if !strings.HasPrefix(s.usageTableSQL, "CREATE TABLE usage_logs") {
		return nil, fmt.Errorf("usage_logs is defined as %.40q, not as the migrations make it", s.usageTableSQL)
	}
	return s, nil
}

// params are the connection settings, applied by the driver on every new
// connection.
func params(writer bool) string {
	v := url.Values{}
	// WAL lets readers run while the writer writes; NORMAL sync is safe in
	// WAL (a power cut may lose the last commits, never corrupt the file).
	v.Set("_journal_mode", "WAL")
	v.Set("_synchronous", "NORMAL")
	// Waits out locks held by another process (a CLI subcommand on the same
	// file) or a checkpoint, instead of failing at once.
	v.Set("_busy_timeout", "5000")
	v.Set("_foreign_keys", "on")
	// The writer runs a handful of fixed statements over and over.
	v.Set("_stmt_cache_size", "32")
	if writer {
		// Take the write lock at BEGIN: a deferred transaction that reads
		// first and then writes cannot wait for the lock, it fails busy.
		v.Set("_txlock", "immediate")
	} else {
		v.Set("_query_only", "on")
	}
	return v.Encode()
}

// fileURI turns a path into an absolute file: URI (so that '?', '#' and '%'
// in a path mean themselves) and creates its parent directory and the file.
// A dsn that is already a file: URI is returned as it is, its file created
// the same way.
func fileURI(dsn string) (string, error) {
	if strings.HasPrefix(dsn, "file:") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("sqlite: database URI: %w", err)
		}
		if p := cmp.Or(u.Opaque, u.Path); p != "" && p != ":memory:" && u.Query().Get("mode") != "memory" {
			if err := createPrivate(p); err != nil {
				return "", err
			}
		}
		return dsn, nil
	}
	abs, err := filepath.Abs(dsn)
	if err != nil {
		return "", fmt.Errorf("sqlite: database path %s: %w", dsn, err)
	}
	if err := createPrivate(abs); err != nil {
		return "", err
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // Windows drive letters: file:///C:/...
	}
	return u.String(), nil
}

// createPrivate creates the database file, and its directory when missing,
// readable by the gateway's user alone: the file holds redemption codes and
// password and key hashes. SQLite gives its -wal, -shm and -journal files
// the database file's permissions, so they are private too; left to itself
// it would create all of them 0644. An existing file that others may read
// or write (one made by an older gateway, or copied in) is made private
// too, with its side files.
func createPrivate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("sqlite: create database directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: create database file: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		info, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sqlite: database file: %w", err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, perm&^0o077); err != nil {
				return fmt.Errorf("sqlite: make %s private (it is %v): %w", filepath.Base(p), perm, err)
			}
		}
	}
	return nil
}

func withParams(uri, params string) string {
	if strings.Contains(uri, "?") {
		return uri + "&" + params
	}
	return uri + "?" + params
}

// Close closes both pools.
func (s *Store) Close() error {
	// the runs being filled get their upstream ids' filters, so that a
	// restart leaves no range a lookup must read whole; failing that, the
	// lookup reads them (upstreamblooms.go)
	if open := s.blooms.all(); len(open.final) > 0 {
		_ = s.inRawTx(context.Background(), func(tx execer) error { return open.write(context.Background(), tx) })
	}
	if s.r == s.w {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// inTx runs fn in a write transaction and commits it if fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// sqlErr translates constraint failures into the store's errors, keeping the
// driver's message for the log.
func sqlErr(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.ErrConstraintForeignKey:
			return fmt.Errorf("referenced row %w: %w", store.ErrNotFound, err)
		}
	}
	return err
}

// mustAffect reports ErrNotFound (as what) when a write matched no row.
func mustAffect(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

// Times are stored as unix milliseconds; the zero time.Time is NULL.

// now is the current time at the precision the database keeps, so that a
// value the store fills in equals what a later read returns.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}

// nullString stores "" as NULL, for columns where NULL keeps UNIQUE from
// counting empty values as duplicates.
func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// notFound maps sql.ErrNoRows to ErrNotFound (as what).
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}
