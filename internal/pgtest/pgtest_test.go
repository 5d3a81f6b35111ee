package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/internal/pgtest"
)

// A started cluster serves a fresh database over loopback TCP, with fsync
// off, and each Database call is a database of its own.
func TestStart(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	if !strings.HasPrefix(dsn, "postgres://postgres@127.0.0.1:") {
		t.Fatalf("dsn %q is not loopback TCP", dsn)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync, db string
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_database()`).Scan(&fsync, &db); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" || !strings.HasPrefix(db, "test_") {
		t.Fatalf("fsync %s, database %s", fsync, db)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (x int)`); err != nil {
		t.Fatalf("the database is not writable: %v", err)
	}
}

func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	a, b := c.Database(t), c.Database(t)
	if a == b {
		t.Fatalf("two databases share %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees a's table: %d, %v", n, err)
	}
}

// A stopped server refuses connections and, restarted, serves the same
// data on the same address: a database going down mid-run and coming back.
func TestStopRestart(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	dsn := c.Database(t)
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE TABLE kept (x int)`); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a stopped server took a connection")
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := exec(`INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
