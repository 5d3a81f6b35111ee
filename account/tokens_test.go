package account_test

import (
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestKeyWithin: a management key makes or changes no key wider than
// itself in any of its limits, and anything within them.
func TestKeyWithin(t *testing.T) {
	at := time.Now().Add(time.Hour)
	key := &store.Token{Management: true, QuotaLimit: 1000, UsedQuota: 400, Models: []string{"a", "b"}, ExpiresAt: at,
		Limits: store.Limits{RPM: 10}}
	within := account.TokenSpec{QuotaLimit: 600, Models: []string{"a"}, ExpiresAt: at, Limits: store.Limits{RPM: 10, TPM: 5}}
	if err := account.KeyWithin(key, within, 0); err != nil {
		t.Fatalf("a key within: %v", err)
	}
	if err := account.KeyWithin(key, account.SpecOf(key), key.UsedQuota); err != nil {
		t.Fatalf("the key itself: %v", err)
	}
	for name, change := range map[string]func(s *account.TokenSpec){
		"no quota limit":      func(s *account.TokenSpec) { s.QuotaLimit = 0 },
		"more than it has":    func(s *account.TokenSpec) { s.QuotaLimit = 601 },
		"every model":         func(s *account.TokenSpec) { s.Models = nil },
		"another model":       func(s *account.TokenSpec) { s.Models = []string{"a", "c"} },
		"no expiry":           func(s *account.TokenSpec) { s.ExpiresAt = time.Time{} },
		"a later expiry":      func(s *account.TokenSpec) { s.ExpiresAt = at.Add(time.Second) },
		"no rate limit":       func(s *account.TokenSpec) { s.Limits.RPM = 0 },
		"a higher rate limit": func(s *account.TokenSpec) { s.Limits.RPM = 11 },
	} {
		spec := within
		change(&spec)
		if err := account.KeyWithin(key, spec, 0); code(err) != "key_too_wide" {
			t.Errorf("%s: %v, want key_too_wide", name, err)
		}
	}
	// a key that has spent part of its limit may keep it, not raise it
	self := account.SpecOf(key)
	self.QuotaLimit = 1001
	if err := account.KeyWithin(key, self, key.UsedQuota); code(err) != "key_too_wide" {
		t.Errorf("the key lifting its own limit: %v", err)
	}
	// an unlimited management key bounds nothing
	if err := account.KeyWithin(&store.Token{Management: true}, account.TokenSpec{}, 0); err != nil {
		t.Errorf("under an unlimited key: %v", err)
	}
}
