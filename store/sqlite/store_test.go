package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// Several stores on one file: a gateway and a CLI command, or two
// processes started by mistake on the same file.
func TestStoreInstances(t *testing.T) {
	storetest.RunInstances(t, func(t *testing.T, n int) []store.Store {
		path := filepath.Join(t.TempDir(), "shared.db")
		stores := make([]store.Store, n)
		for i := range stores {
			stores[i] = openAt(t, path)
		}
		return stores
	})
}

func BenchmarkSettleBatch(b *testing.B) {
	storetest.BenchSettleBatch(b, openTemp(b))
}
