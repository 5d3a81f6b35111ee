package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/caddy-model-gateway/gateway/store"
)

// migrations are the schema's history, one file per step, named
// NNNN_what.sql. A file, once released, is never edited: a change is a new
// file with the next number.
//
//go:embed migrations/*.sql
var embedded embed.FS

var migrations = store.MigrationsIn(embedded, "migrations")

// migrate applies, in order, every migration in fsys that the database has
// not recorded yet, each in its own transaction together with its
// schema_migrations row. Versions the database has beyond those in fsys (a
// newer build ran here) are left alone: migrations only add, so an older
// build's queries still work, and refusing to start would block a rollback.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m store.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback()

	// Checked inside the transaction, which holds the write lock, so two
	// processes opening the same new file cannot both apply a step.
	var n int
	if err := tx.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, now().UnixMilli()); err != nil {
		return fmt.Errorf("migration %s: record: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}
