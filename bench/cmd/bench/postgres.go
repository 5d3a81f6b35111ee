package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/internal/pgtest"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/postgres"
)

// pgDatabase is the database the gateway_pg instance uses. Its statistics
// are read from a connection to another database (postgres), so the
// bench's own queries are not counted as the gateway's writes.
const pgDatabase = "gateway_bench"

// pgSetup is the gateway_pg target: a throwaway PostgreSQL cluster and a
// second Caddy process whose gateway app keeps its data there.
type pgSetup struct {
	cluster   *pgtest.Cluster
	dsn       string // the gateway's database, over loopback TCP
	adminDSN  string // the postgres database, for statistics
	serverPid int    // the postmaster: the server's processes are its children
	inst      instance
	port      int // the gateway site
	token     string
	start     pgStats // before the gateway_pg process started
}

// startPostgres starts the cluster, creates the gateway's database, writes
// the second Caddyfile and creates the bench user and token in it through
// the CLI, as for the SQLite gateway.
func (s *setup) startPostgres(ctx context.Context) (*pgSetup, error) {
	c, err := pgtest.New()
	if err != nil {
		return nil, fmt.Errorf("starting PostgreSQL for gateway_pg: %w", err)
	}
	pg := &pgSetup{cluster: c, dsn: c.DSN(pgDatabase), adminDSN: c.DSN("postgres")}
	fail := func(err error) (*pgSetup, error) {
		c.Close()
		return nil, err
	}
	conn, err := pgx.Connect(ctx, pg.adminDSN)
	if err != nil {
		return fail(fmt.Errorf("connecting to the bench's PostgreSQL: %w", err))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgDatabase); err != nil {
		return fail(fmt.Errorf("creating the gateway_pg database: %w", err))
	}
	// the backend serving this connection is a child of the postmaster
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return fail(fmt.Errorf("reading the backend's pid: %w", err))
	}
	if pg.serverPid, err = parentPid(backend); err != nil {
		return fail(fmt.Errorf("finding the PostgreSQL server's process: %w", err))
	}

	if pg.inst.adminPort, err = freePort(); err != nil {
		return fail(err)
	}
	if pg.port, err = freePort(); err != nil {
		return fail(err)
	}
	pg.inst.caddyfile = filepath.Join(s.dir, "Caddyfile-pg")
	pg.inst.ready = fmt.Sprintf("http://127.0.0.1:%d/v1/models", pg.port)
	pg.inst.anyStatus = true
	if err := os.WriteFile(pg.inst.caddyfile, []byte(s.caddyfileFor(pg.inst.adminPort, "postgres "+pg.dsn, 0, pg.port)), 0o644); err != nil {
		return fail(err)
	}
	if pg.token, err = s.createToken(pg.inst.caddyfile); err != nil {
		return fail(fmt.Errorf("gateway_pg: %w", err))
	}
	return pg, nil
}

// parentPid reads a process's parent from /proc/<pid>/stat.
func parentPid(pid int) (int, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1])
}

// procStat is the fields of /proc/<pid>/stat after the command name, so
// f[0] is the state, f[1] the parent, f[11] and f[12] utime and stime,
// f[13] and f[14] the reaped children's.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// the command name may hold spaces; fields start after its ')'
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return nil, errors.New("short /proc stat")
	}
	return f, nil
}

func ticks(f []string, i int) time.Duration {
	v, _ := strconv.ParseInt(f[i], 10, 64)
	return time.Duration(float64(v) / clockTicks * float64(time.Second))
}

// dbCPU is the CPU the PostgreSQL server has used: the postmaster's own,
// its exited children's (which the kernel adds to the postmaster's when it
// reaps them) and its live children's (the backends serving connections,
// the writers, autovacuum).
func dbCPU(server int) time.Duration {
	f, err := procStat(server)
	if err != nil {
		return 0
	}
	total := ticks(f, 11) + ticks(f, 12) + ticks(f, 13) + ticks(f, 14)
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(server)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cf, err := procStat(pid); err == nil && cf[1] == parent {
			total += ticks(cf, 11) + ticks(cf, 12)
		}
	}
	return total
}

// pgStats is the gateway database's row of pg_stat_database.
type pgStats struct {
	Commits   int64 `json:"xact_commit"`
	Rollbacks int64 `json:"xact_rollback"`
	Inserted  int64 `json:"tup_inserted"`
	Updated   int64 `json:"tup_updated"`
	Deleted   int64 `json:"tup_deleted"`
}

func (a pgStats) sub(b pgStats) pgStats {
	return pgStats{a.Commits - b.Commits, a.Rollbacks - b.Rollbacks, a.Inserted - b.Inserted, a.Updated - b.Updated, a.Deleted - b.Deleted}
}

// stats reads the gateway database's statistics once no session is
// connected to it: each backend sends its counts when it exits at the
// latest, so with none left the figures are complete.
func (pg *pgSetup) stats(ctx context.Context) (pgStats, error) {
	var st pgStats
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.adminDSN)
	if err != nil {
		return st, fmt.Errorf("connecting for pg_stat_database: %w", err)
	}
	defer conn.Close(ctx)
	for {
		var sessions int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", pgDatabase).Scan(&sessions); err != nil {
			return st, fmt.Errorf("counting the gateway database's sessions: %w", err)
		}
		if sessions == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("%d sessions still connected to %s", sessions, pgDatabase)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// a backend's counts reach the shared statistics just after it exits
	time.Sleep(200 * time.Millisecond)
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return st, fmt.Errorf("clearing the statistics snapshot: %w", err)
	}
	err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted
		FROM pg_stat_database WHERE datname = $1`, pgDatabase).
		Scan(&st.Commits, &st.Rollbacks, &st.Inserted, &st.Updated, &st.Deleted)
	if err != nil {
		return st, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	return st, nil
}

// countPGUsage counts the gateway_pg instance's usage rows and the
// database's writes over the run, once its process has stopped.
func (b *bench) countPGUsage(ctx context.Context) {
	pg, u := b.s.pg, b.report.UsagePG
	u.UsageRows = -1
	if st, err := store.Open("postgres", pg.dsn); err != nil {
		u.Error = fmt.Sprintf("opening the PostgreSQL store: %v", err)
	} else {
		n, err := st.CountUsage(ctx)
		st.Close()
		if err != nil {
			u.Error = fmt.Sprintf("counting usage rows: %v", err)
		} else {
			u.UsageRows, u.CountedBy = n, "store CountUsage (usage_logs rows, PostgreSQL)"
		}
	}
	end, err := pg.stats(ctx)
	if err != nil {
		b.report.note("gateway_pg database writes: %v", err)
		return
	}
	w := &dbWrites{Delta: end.sub(pg.start), Requests: u.GatewayRequests}
	if w.Requests > 0 {
		n := float64(w.Requests)
		w.CommitsPerRequest = float64(w.Delta.Commits) / n
		w.InsertedPerRequest = float64(w.Delta.Inserted) / n
		w.UpdatedPerRequest = float64(w.Delta.Updated) / n
		w.DeletedPerRequest = float64(w.Delta.Deleted) / n
	}
	b.report.Database = w
}

// dbWrites is what the gateway_pg instance wrote to its database over the
// whole run (its start-up and shutdown included), per request sent to it.
type dbWrites struct {
	Delta              pgStats `json:"delta"`
	Requests           int     `json:"requests"`
	CommitsPerRequest  float64 `json:"commits_per_request"`
	InsertedPerRequest float64 `json:"rows_inserted_per_request"`
	UpdatedPerRequest  float64 `json:"rows_updated_per_request"`
	DeletedPerRequest  float64 `json:"rows_deleted_per_request"`
}
