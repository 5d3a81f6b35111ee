package gatewaytest

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// RefuseInserts makes the gateway's database refuse, from now until the
// returned function is called (or the test ends), every insert into table
// whose row matches when (an SQL condition on NEW, the same text in SQLite
// and PostgreSQL): a database that fails one statement of a transaction,
// so that a test can show the statements before it were not kept either.
func (g *Gateway) RefuseInserts(table, when string) (restore func()) {
	g.t.Helper()
	ctx := context.Background()
	var exec func(string) error
	if g.DSN != "" {
		conn, err := pgx.Connect(ctx, expandEnv(g.DSN))
		if err != nil {
			g.t.Fatal(err)
		}
		defer conn.Close(ctx)
		exec = func(q string) error { _, err := conn.Exec(ctx, q); return err }
		if err := exec(`CREATE FUNCTION gatewaytest_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused by the test'; END $$`); err != nil {
			g.t.Fatal(err)
		}
		if err := exec(`CREATE TRIGGER gatewaytest_refuse BEFORE INSERT ON ` + table + ` FOR EACH ROW WHEN (` + when + `)
			EXECUTE FUNCTION gatewaytest_refuse()`); err != nil {
			g.t.Fatal(err)
		}
		return g.onceCleanup(func() error {
			conn, err := pgx.Connect(ctx, expandEnv(g.DSN))
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, `DROP TRIGGER gatewaytest_refuse ON `+table+`; DROP FUNCTION gatewaytest_refuse()`)
			return err
		})
	}
	db, err := sql.Open("sqlite3", "file:"+g.DBPath+"?_busy_timeout=10000")
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TRIGGER gatewaytest_refuse BEFORE INSERT ON ` + table + ` WHEN ` + when + `
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`); err != nil {
		db.Close()
		g.t.Fatal(err)
	}
	return g.onceCleanup(func() error {
		defer db.Close()
		_, err := db.Exec(`DROP TRIGGER gatewaytest_refuse`)
		return err
	})
}

// onceCleanup runs undo once: when the test calls what it returns, or
// when the test ends.
func (g *Gateway) onceCleanup(undo func() error) func() {
	done := false
	run := func() {
		if done {
			return
		}
		done = true
		if err := undo(); err != nil {
			g.t.Errorf("undo: %v", err)
		}
	}
	g.t.Cleanup(run)
	return run
}
