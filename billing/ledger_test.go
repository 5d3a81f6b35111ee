package billing

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

func TestLedgerReserveSettleCommit(t *testing.T) {
	l := NewLedger()
	u := &store.User{ID: 1, Quota: 100}
	tok := &store.Token{ID: 7}

	h1, ok := l.Admit(u, tok, 60)
	if !ok {
		t.Fatal("60 of 100 refused")
	}
	if _, ok := l.Admit(u, tok, 50); ok {
		t.Fatal("50 more admitted with only 40 unreserved")
	}
	if _, ok := l.Admit(u, tok, 0); !ok {
		t.Fatal("a free request was refused")
	}
	l.Settle(h1, 30) // cost less than reserved: 70 available again
	if avail, _ := l.Available(1); avail != 70 {
		t.Fatalf("available = %d, want 70", avail)
	}
	// a sync that read the store before the commit must not double count
	stale := l.StampUser(1)
	l.Committed(map[int64]int64{1: 30}, map[int64]int64{7: 30})
	l.SyncUser(stale, &store.User{ID: 1, Quota: 100})
	if avail, _ := l.Available(1); avail != 70 {
		t.Fatalf("after a stale sync available = %d, want 70", avail)
	}
	// a fresh read of the store (someone topped up to 500) takes effect
	l.SyncUser(l.StampUser(1), &store.User{ID: 1, Quota: 500})
	if avail, _ := l.Available(1); avail != 500 {
		t.Fatalf("after sync available = %d, want 500", avail)
	}
}

func TestLedgerTokenLimit(t *testing.T) {
	l := NewLedger()
	u := &store.User{ID: 1, Quota: 1000}
	tok := &store.Token{ID: 2, QuotaLimit: 100, UsedQuota: 90}
	if _, ok := l.Admit(u, tok, 20); ok {
		t.Fatal("admitted past the token's own limit")
	}
	if _, ok := l.Admit(u, tok, 10); !ok {
		t.Fatal("refused within the token's limit")
	}
	unlimited := &store.Token{ID: 3}
	if _, ok := l.Admit(u, unlimited, 900); !ok {
		t.Fatal("a token without a limit was limited")
	}
}
