package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/postgres"
	"github.com/caddy-model-gateway/gateway/store/storetest"
)

// openAt opens a store on dsn through the registry, as the gateway app
// does, and closes it when the test ends.
func openAt(t testing.TB, dsn string) store.Store {
	t.Helper()
	s, err := store.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openAt(t, postgres.NewTestDatabase(t)) })
}

// Several pools on one database: gateway instances sharing it.
func TestStoreInstances(t *testing.T) {
	storetest.RunInstances(t, func(t *testing.T, n int) []store.Store {
		dsn := postgres.NewTestDatabase(t)
		stores := make([]store.Store, n)
		for i := range stores {
			stores[i] = openAt(t, dsn)
		}
		return stores
	})
}

func BenchmarkSettleBatch(b *testing.B) {
	storetest.BenchSettleBatch(b, openAt(b, postgres.NewTestDatabase(b)))
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(store.Drivers(), "postgres") {
		t.Fatalf("drivers %v lack postgres", store.Drivers())
	}
}

func TestOpenRefusesBadDSN(t *testing.T) {
	for _, dsn := range []string{"", "postgres://user:secret@[::1", "host=127.0.0.1 port=notaport password=secret"} {
		_, err := postgres.Open(dsn)
		if err == nil {
			t.Fatalf("%q opened", dsn)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

// Instances starting at once on a new database apply each migration once,
// and a reopen applies nothing.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	ctx := context.Background()
	dsn := postgres.NewTestDatabase(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(dsn)
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	before := migrationRows(t, dsn)
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	// the files' versions, which need not be contiguous (each change
	// takes its own number, and they are merged in any order)
	var want []int64
	for _, f := range files {
		num, _, _ := strings.Cut(f.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f.Name(), err)
		}
		want = append(want, v)
	}
	slices.Sort(want)
	var got []int64
	for _, r := range before {
		got = append(got, r[0])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("schema_migrations = %v, want versions %v once each", before, want)
	}
	s := openAt(t, dsn)
	if after := migrationRows(t, dsn); !slices.Equal(before, after) {
		t.Fatalf("reopen changed schema_migrations: %v then %v", before, after)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func migrationRows(t *testing.T, dsn string) [][2]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
		var v [2]int64
		err := r.Scan(&v[0], &v[1])
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Ping fails when the server would refuse the usage writer's commits.
func TestPingFailsReadOnly(t *testing.T) {
	ctx := context.Background()
	dsn := postgres.NewTestDatabase(t)
	s := openAt(t, dsn)
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+db+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, dsn) // new connections take the setting
	if err := ro.Ping(ctx); err == nil {
		t.Fatal("ping passed on a read-only database")
	}
}

// A key=value DSN opens the same database as its URL.
func TestOpenKeyValueDSN(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(postgres.NewTestDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	byURL := openAt(t, u.String())
	kv := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable pool_max_conns=2",
		u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	byKV := openAt(t, kv)
	if err := byURL.CreateUser(ctx, &store.User{Username: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := byKV.UserByName(ctx, "shared"); err != nil {
		t.Fatalf("the key=value DSN sees another database: %v", err)
	}
}
