package keys_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

func TestGenerate(t *testing.T) {
	a, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := keys.Generate()
	if a == b || !strings.HasPrefix(a, "sk-") || len(a) != 3+48 {
		t.Fatalf("keys %q and %q", a, b)
	}
	if keys.Hash(a) == keys.Hash(b) || len(keys.Hash(a)) != 64 || strings.Contains(keys.Hash(a), a[3:]) {
		t.Fatal("hashes are not distinct hex digests")
	}
	if p := keys.DisplayPrefix(a); p != a[:9] {
		t.Fatalf("prefix %q", p)
	}
}

// countingStore counts token reads, to show the cache spares the database.
type countingStore struct {
	store.Store
	reads int
}

func (c *countingStore) TokenByHash(ctx context.Context, h string) (*store.Token, error) {
	c.reads++
	return c.Store.TokenByHash(ctx, h)
}

func TestCache(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	u := &store.User{Username: "u", PasswordHash: "x", Quota: 5}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	key, _ := keys.Generate()
	tok := &store.Token{UserID: u.ID, Name: "t", KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key)}
	if err := st.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	c := keys.NewCache(cs, 50*time.Millisecond)

	for i := 0; i < 100; i++ {
		id, err := c.Lookup(ctx, key)
		if err != nil || id.User.ID != u.ID || id.Token.ID != tok.ID {
			t.Fatalf("lookup: %v %+v", err, id)
		}
	}
	if cs.reads != 1 {
		t.Fatalf("100 lookups read the store %d times, want 1", cs.reads)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Lookup(ctx, "sk-unknown"); !errors.Is(err, keys.ErrUnknownKey) {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if cs.reads != 2 {
		t.Fatalf("unknown keys read the store %d times, want once", cs.reads-1)
	}

	// a change in the store shows up after the freshness window
	if err := st.SetTokenStatus(ctx, tok.ID, store.TokenDisabled); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		id, _ := c.Lookup(ctx, key)
		if id.Token.Status == store.TokenDisabled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw the token disabled")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pausedStore holds token reads while pause is set, until resume is
// closed: a read in flight while a change is announced.
type pausedStore struct {
	store.Store
	entered chan struct{}
	resume  chan struct{}
}

func (p *pausedStore) TokenByHash(ctx context.Context, h string) (*store.Token, error) {
	t, err := p.Store.TokenByHash(ctx, h)
	if p.entered != nil {
		close(p.entered)
		p.entered = nil
		<-p.resume
	}
	return t, err
}

// A read begun before a change is announced answers its request but is
// not cached: the next lookup reads the change. ForgetAll drops known
// and unknown keys alike.
func TestCacheForgetsAcrossAReadInFlight(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	u := &store.User{Username: "u", PasswordHash: "x", Quota: 5}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	key, _ := keys.Generate()
	tok := &store.Token{UserID: u.ID, Name: "t", KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key)}
	if err := st.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	ps := &pausedStore{Store: st, entered: make(chan struct{}), resume: make(chan struct{})}
	c := keys.NewCache(ps, time.Hour)
	entered := ps.entered
	got := make(chan *keys.Identity, 1)
	go func() {
		id, err := c.Lookup(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- id
	}()
	<-entered // the token is read, enabled
	if err := st.SetTokenStatus(ctx, tok.ID, store.TokenDisabled); err != nil {
		t.Fatal(err)
	}
	c.Forget(tok.KeyHash) // the announcement
	close(ps.resume)
	if id := <-got; id.Token.Status != store.TokenEnabled {
		t.Fatalf("the read in flight answered %q", id.Token.Status)
	}
	if id, err := c.Lookup(ctx, key); err != nil || id.Token.Status != store.TokenDisabled {
		t.Fatalf("after the change was announced: %v %+v; the read from before it was cached", err, id)
	}

	other, _ := keys.Generate()
	if _, err := c.Lookup(ctx, other); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatal(err)
	}
	late := &store.Token{UserID: u.ID, Name: "late", KeyHash: keys.Hash(other), KeyPrefix: keys.DisplayPrefix(other)}
	if err := st.CreateToken(ctx, late); err != nil {
		t.Fatal(err)
	}
	c.ForgetAll()
	if id, err := c.Lookup(ctx, other); err != nil || id.Token.ID != late.ID {
		t.Fatalf("a key added while changes were missed: %v %+v", err, id)
	}
}
