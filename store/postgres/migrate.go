package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/store"
)

// migrations are the schema's history, one file per step, named
// NNNN_what.sql, numbered as store/sqlite's. A file, once released, is
// never edited: a change is a new file with the next number.
//
//go:embed migrations/*.sql
var embedded embed.FS

var migrations = store.MigrationsIn(embedded, "migrations")

// migrationLock is the advisory lock key migrations hold ("gatewaymig"),
// so that instances starting at once apply each step once: the others wait,
// then find it recorded.
const migrationLock int64 = 0x67617465776d6967

// migrate applies, in order, every migration in fsys that the database has
// not recorded yet, each in its own transaction together with its
// schema_migrations row, while holding the advisory lock on one
// connection. Versions the database has beyond those in fsys (a newer
// build ran here) are left alone: migrations only add, so an older build's
// queries still work, and refusing to start would block a rollback.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		// a lock left behind would block every later start; dropping the
		// connection releases it when the unlock itself fails
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, migrationLock); err != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	// Created only when missing: an up-to-date database is then opened
	// without a write, so a server that refuses writes is reported by
	// Ping (the health check) rather than by a gateway that cannot start.
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("find schema_migrations: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (
			version    BIGINT PRIMARY KEY,
			applied_at BIGINT NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	for _, m := range ms {
		if err := applyMigration(ctx, conn.Conn(), m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, conn *pgx.Conn, m store.Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`,
			m.Version).Scan(&n); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if n > 0 {
			return nil
		}
		// no arguments: pgx sends it as a simple query, which may hold
		// several statements
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
			m.Version, now().UnixMilli()); err != nil {
			return fmt.Errorf("migration %s: record: %w", m.Name, err)
		}
		return nil
	})
}
