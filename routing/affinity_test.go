package routing

import (
	"testing"
	"time"
)

// clock is a fake clock the tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) add(d time.Duration)  { c.t = c.t.Add(d) }
func conv(n byte) (id ConversationID) { id[0] = n; return id }
func bind(ch string, key int) Binding { return Binding{Channel: ch, Key: key} }

func TestAffinityTTL(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	a := NewAffinity(time.Hour, 10)
	a.Now = c.now
	a.Bind(conv(1), bind("a", 2))
	c.add(59 * time.Minute)
	if b, ok := a.Lookup(conv(1)); !ok || b != bind("a", 2) {
		t.Fatalf("binding before its TTL: %+v %v", b, ok)
	}
	// a lookup does not refresh; an answer (Bind) does
	a.Bind(conv(1), bind("a", 2))
	c.add(59 * time.Minute)
	if _, ok := a.Lookup(conv(1)); !ok {
		t.Fatal("a binding refreshed by an answer expired an hour after it was first made")
	}
	c.add(time.Minute)
	if _, ok := a.Lookup(conv(1)); ok {
		t.Fatal("a binding idle for its TTL was kept")
	}
	if a.Len() != 0 {
		t.Fatalf("an expired binding is still held: %d", a.Len())
	}
}

func TestAffinityLRUBound(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	a := NewAffinity(time.Hour, 3)
	a.Now = c.now
	for i := byte(1); i <= 3; i++ {
		a.Bind(conv(i), bind("a", int(i)))
		c.add(time.Second)
	}
	a.Bind(conv(1), bind("a", 1)) // 1 is now the most recently used
	a.Bind(conv(4), bind("a", 4))
	if a.Len() != 3 {
		t.Fatalf("held %d bindings, bound is 3", a.Len())
	}
	if _, ok := a.Lookup(conv(2)); ok {
		t.Fatal("the least recently used binding was kept over the bound")
	}
	for _, i := range []byte{1, 3, 4} {
		if _, ok := a.Lookup(conv(i)); !ok {
			t.Fatalf("binding %d dropped, not the least recently used", i)
		}
	}
	// expired bindings at the back go when a new one comes, before the bound
	c.add(2 * time.Hour)
	a.Bind(conv(5), bind("b", 0))
	if a.Len() != 1 {
		t.Fatalf("held %d bindings after the others expired, want 1", a.Len())
	}
	a.Configure(time.Hour, 0)
	for i := 0; i < DefaultAffinityMaxEntries+10; i++ {
		var id ConversationID
		id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
		a.Bind(id, bind("a", 0))
	}
	if a.Len() != DefaultAffinityMaxEntries {
		t.Fatalf("held %d bindings, default bound is %d", a.Len(), DefaultAffinityMaxEntries)
	}
}

func TestBoundKey(t *testing.T) {
	ch := &Channel{Name: "a", Keys: []string{"k0", "k1", "k2"}}
	_, i := ch.NextKey()
	b := Binding{Channel: "a", Key: 2, KeySum: KeySum("k2")}
	if k, ok := ch.BoundKey(b); !ok || k != "k2" {
		t.Fatalf("bound key: %q %v", k, ok)
	}
	if _, j := ch.NextKey(); j != (i+1)%3 {
		t.Fatalf("rotation: %d after %d", j, i)
	}
	// a reload that replaced the key at that place
	ch2 := &Channel{Name: "a", Keys: []string{"k0", "k1", "new"}}
	if _, ok := ch2.BoundKey(b); ok {
		t.Fatal("a binding kept a key the channel no longer has")
	}
	if _, ok := (&Channel{Name: "a", Keys: []string{"k0"}}).BoundKey(b); ok {
		t.Fatal("a binding kept a key index the channel no longer has")
	}
	if _, ok := (&Channel{Name: "b", Keys: ch.Keys}).BoundKey(b); ok {
		t.Fatal("a binding named another channel's key")
	}
	if _, ok := (&Channel{Name: "n"}).BoundKey(Binding{Channel: "n", Key: -1}); !ok {
		t.Fatal("a keyless channel's binding")
	}
}

func TestAffinityConfigSet(t *testing.T) {
	var c AffinityConfig
	for _, kv := range [][2]string{{"ttl", "90m"}, {"max_entries", "500"}, {"off", ""}} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("%v: %v", kv, err)
		}
	}
	if c != (AffinityConfig{Off: true, TTL: 90 * time.Minute, MaxEntries: 500}) {
		t.Fatalf("config %+v", c)
	}
	for _, kv := range [][2]string{{"ttl", "0s"}, {"ttl", "soon"}, {"max_entries", "-1"}, {"max_entries", "many"}, {"off", "yes"}, {"size", "1"}} {
		if err := c.Set(kv[0], kv[1]); err == nil {
			t.Errorf("%v accepted", kv)
		}
	}
}
