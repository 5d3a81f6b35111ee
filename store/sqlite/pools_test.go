package sqlite

import (
	"path/filepath"
	"testing"
)

// The lock-free guarantee rests on these two facts: one writer connection,
// and readers that cannot take the write lock by mistake.
func TestPools(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	if n := s.w.Stats().MaxOpenConnections; n != 1 {
		t.Fatalf("writer pool allows %d connections, want 1", n)
	}
	if _, err := s.r.Exec(`INSERT INTO tasks (id, user_id, status, created_at, updated_at) VALUES ('x', 1, 'p', 0, 0)`); err == nil {
		t.Fatal("reader pool wrote")
	}
	var fk int
	if err := s.w.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1", fk, err)
	}
}
