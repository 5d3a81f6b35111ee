package postgres

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/pgtest"
)

// testCluster is the package's throwaway server; each test gets a
// database of its own.
var testCluster *pgtest.Cluster

func TestMain(m *testing.M) {
	var err error
	if testCluster, err = pgtest.New(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := testCluster.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// NewTestDatabase gives the package's external tests a fresh database.
func NewTestDatabase(t testing.TB) string { return testCluster.Database(t) }

// openTestStore opens the store on a fresh database, closed when the test
// ends.
func openTestStore(t testing.TB) *Store {
	t.Helper()
	st, err := Open(testCluster.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.(*Store)
}

// The pool holds what pool_max_conns says, and pgx's default without it.
func TestPoolSize(t *testing.T) {
	dsn := testCluster.Database(t)
	for _, tt := range []struct {
		dsn  string
		want int32
	}{
		{dsn + "&pool_max_conns=3", 3},
		{dsn, int32(max(4, runtime.NumCPU()))},
	} {
		s, err := Open(tt.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.(*Store).pool.Config().MaxConns; got != tt.want {
			t.Errorf("%s: pool of %d, want %d", tt.dsn, got, tt.want)
		}
		s.Close()
	}
}
