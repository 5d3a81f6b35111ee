package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

func key(t *testing.T, r Request) Key {
	t.Helper()
	k, err := KeyOf(&r)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyCanonical(t *testing.T) {
	base := Request{Scope: ScopeUser, UserID: 1, TokenID: 7, Dialect: "openai", Path: "/v1/chat/completions", Model: "gpt-4o",
		Body: []byte(`{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"hi"}],"meta":{"a":1,"b":[1,2]}}`)}
	k := key(t, base)
	same := []string{
		`{ "messages" : [ { "content":"hi", "role":"user" } ], "temperature":0,
		   "meta":{"b":[1, 2],"a":1}, "model":"gpt-4o" }`,
		"\n\t{\"meta\":{\"a\":1,\"b\":[1,2]},\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0}\n",
	}
	for _, b := range same {
		r := base
		r.Body = []byte(b)
		if key(t, r) != k {
			t.Errorf("reordered or respaced body has another key: %s", b)
		}
	}
	differ := map[string]func(*Request){
		"content":     func(r *Request) { r.Body = bytes.Replace(r.Body, []byte(`"hi"`), []byte(`"ho"`), 1) },
		"array order": func(r *Request) { r.Body = bytes.Replace(r.Body, []byte(`[1,2]`), []byte(`[2,1]`), 1) },
		"number": func(r *Request) {
			r.Body = bytes.Replace(r.Body, []byte(`"temperature":0`), []byte(`"temperature":1`), 1)
		},
		"string not number": func(r *Request) {
			r.Body = bytes.Replace(r.Body, []byte(`"temperature":0`), []byte(`"temperature":"0"`), 1)
		},
		"dialect": func(r *Request) { r.Dialect = "anthropic" },
		"path":    func(r *Request) { r.Path = "/v1/responses" },
		"model":   func(r *Request) { r.Model = "gpt-4o-mini" },
		"stream":  func(r *Request) { r.Stream = true },
		"header":  func(r *Request) { r.Headers = []string{"2023-06-01"} },
		"user":    func(r *Request) { r.UserID = 2 },
	}
	for name, change := range differ {
		r := base
		r.Body = append([]byte(nil), base.Body...)
		change(&r)
		if key(t, r) == k {
			t.Errorf("%s: same key", name)
		}
	}
	// strings holding brackets, quotes and escapes; nested objects reordered
	tricky := `{"a":"x}]\\\"{","n":{"z":[{"q":"]","p":null},true,-1.5e3],"y":{}},"b\"k":[]}`
	reordered := "{ \"b\\\"k\" : [ ] ,\n \"n\":{\"y\":{ },\"z\":[{\"p\":null,\"q\":\"]\"},true,-1.5e3]}, \"a\":\"x}]\\\\\\\"{\"}"
	r1, r2 := base, base
	r1.Body, r2.Body = []byte(tricky), []byte(reordered)
	if !json.Valid(r1.Body) || !json.Valid(r2.Body) {
		t.Fatalf("test bodies are not JSON: %s %s", r1.Body, r2.Body)
	}
	if key(t, r1) != key(t, r2) {
		t.Errorf("reordered tricky bodies have two keys:\n%s\n%s", r1.Body, r2.Body)
	}
	for _, b := range []string{`[1]`, `{"a":1} {"b":2}`, `{"a":`, ``, `{"a":1,}`, `{"a" 1}`, `{"a":tru}`, `{"a":"x}`, `{"a":[1,2}`, `{"a":{"b":1]}`, `{,}`} {
		r := base
		r.Body = []byte(b)
		if _, err := KeyOf(&r); err == nil {
			t.Errorf("%q has a key", b)
		}
	}
}

func TestKeyScope(t *testing.T) {
	body := []byte(`{"model":"m","seed":1}`)
	k := func(s Scope, user, token int64) Key {
		return key(t, Request{Scope: s, UserID: user, TokenID: token, Dialect: "openai", Path: "/p", Model: "m", Body: body})
	}
	if k(ScopeUser, 1, 10) != k(ScopeUser, 1, 11) {
		t.Error("scope user: two keys of one user do not share")
	}
	if k(ScopeUser, 1, 10) == k(ScopeUser, 2, 10) {
		t.Error("scope user: two users share")
	}
	if k(ScopeKey, 1, 10) == k(ScopeKey, 1, 11) {
		t.Error("scope key: two keys share")
	}
	if k(ScopeShared, 1, 10) != k(ScopeShared, 2, 20) {
		t.Error("scope shared: two users do not share")
	}
	if k(ScopeShared, 1, 10) == k(ScopeUser, 1, 10) || k(ScopeKey, 1, 1) == k(ScopeUser, 1, 1) {
		t.Error("scopes collide")
	}
}

func entry(n int, now time.Time) *Entry {
	return &Entry{Body: bytes.Repeat([]byte("x"), n), Expires: now.Add(time.Minute)}
}

func TestMemoryBoundsAndEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewMemory(3 * (entryOverhead + 100))
	s.Now = func() time.Time { return now }
	ks := []Key{{1}, {2}, {3}, {4}}
	for _, k := range ks[:3] {
		if !s.Put(k, entry(100, now)) {
			t.Fatal("an entry within bounds was refused")
		}
	}
	s.Get(ctx, ks[0]) // the first is now the most recently used: the second goes
	s.Put(ks[3], entry(100, now))
	if s.Get(ctx, ks[1]) != nil {
		t.Error("the least recently used entry was kept past max_bytes")
	}
	for _, k := range []Key{ks[0], ks[2], ks[3]} {
		if s.Get(ctx, k) == nil {
			t.Errorf("entry %d was evicted", k[0])
		}
	}
	if n, b := s.Stats(); n != 3 || b != 3*(entryOverhead+100) {
		t.Errorf("stats %d entries, %d bytes", n, b)
	}
	if s.Put(Key{9}, entry(3*(entryOverhead+100), now)) {
		t.Error("an entry larger than max_bytes was kept")
	}
	s.Resize(entryOverhead + 100)
	if n, b := s.Stats(); n != 1 || b > entryOverhead+100 {
		t.Errorf("after shrinking: %d entries, %d bytes", n, b)
	}
}

func TestMemoryExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewMemory(1 << 20)
	s.Now = func() time.Time { return now }
	c := &Cache{Config: Config{Enable: true, TTL: time.Minute}.withDefaults(), Store: s}
	r := c.Record()
	r.Body("application/json", []byte(`{"ok":true}`))
	if !c.Commit(Key{1}, r, adapters.Usage{PromptTokens: 3}, "ch", now) {
		t.Fatal("not kept")
	}
	now = now.Add(59 * time.Second)
	if e := c.Get(ctx, Key{1}); e == nil || string(e.Body) != `{"ok":true}` || e.Usage.PromptTokens != 3 {
		t.Fatalf("entry before its ttl: %+v", e)
	}
	now = now.Add(time.Second)
	if c.Get(ctx, Key{1}) != nil {
		t.Fatal("entry served at its ttl")
	}
	if n, b := s.Stats(); n != 0 || b != 0 {
		t.Errorf("expired entry still held: %d, %d bytes", n, b)
	}
}

func TestRecorderMaxEntry(t *testing.T) {
	c := &Cache{Config: Config{Enable: true, MaxEntry: entryOverhead + 17 + 2*(40+eventOverhead)}.withDefaults(), Store: NewMemory(1 << 20)}
	now := time.Now()
	r := c.Record()
	r.ContentType("text/event-stream")
	r.Event([]byte(strings.Repeat("a", 40)), now)
	r.Event([]byte(strings.Repeat("b", 40)), now)
	if r.Over() {
		t.Fatal("over before max_entry_bytes")
	}
	r.Event([]byte(strings.Repeat("c", 40)), now)
	if !r.Over() || c.Commit(Key{1}, r, adapters.Usage{}, "", now) {
		t.Fatal("an answer past max_entry_bytes was kept")
	}
	if len(r.e.Body) != 0 {
		t.Error("an oversized answer's bytes are still held")
	}
}

type recorded struct {
	writes []string
	flush  int
}

func (w *recorded) Write(b []byte) (int, error) {
	w.writes = append(w.writes, string(b))
	return len(b), nil
}
func (w *recorded) Flush() error { w.flush++; return nil }

func TestPlay(t *testing.T) {
	now := time.Now()
	for _, replay := range []Replay{ReplayAtOnce, ReplayPace} {
		c := &Cache{Config: Config{Enable: true, Replay: replay}.withDefaults(), Store: NewMemory(1 << 20)}
		r := c.Record()
		for i, ev := range []string{"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"} {
			r.Event([]byte(ev), now.Add(time.Duration(i)*time.Millisecond))
		}
		c.Commit(Key{1}, r, adapters.Usage{}, "", now)
		var w recorded
		if err := c.Play(context.Background(), &w, c.Get(ctx, Key{1})); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(w.writes, "")
		if got != "data: 1\n\ndata: 2\n\ndata: [DONE]\n\n" {
			t.Errorf("%s: replayed %q", replay, got)
		}
		if want := map[Replay]int{ReplayAtOnce: 1, ReplayPace: 3}[replay]; len(w.writes) != want || w.flush != want {
			t.Errorf("%s: %d writes, %d flushes; want %d", replay, len(w.writes), w.flush, want)
		}
	}
}

func TestDecide(t *testing.T) {
	c := &Cache{Config: Config{Enable: true}.withDefaults()}
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Add(kv[i], kv[i+1])
		}
		return hd
	}
	cases := []struct {
		name string
		c    Config
		ask  Ask
		want Decision
	}{
		{"deterministic", Config{}, Ask{Header: h(), Deterministic: true}, Decision{true, true}},
		{"sampled", Config{}, Ask{Header: h()}, Decision{}},
		{"sampled, forced", Config{Force: true}, Ask{Header: h()}, Decision{true, true}},
		{"refused", Config{}, Ask{Header: h(Header, "refuse"), Deterministic: true}, Decision{}},
		{"no-store", Config{}, Ask{Header: h("Cache-Control", "max-age=0, no-store"), Deterministic: true}, Decision{}},
		{"no-cache", Config{}, Ask{Header: h("Cache-Control", "no-cache"), Deterministic: true}, Decision{false, true}},
		{"mode request, not asked", Config{Mode: ModeRequest}, Ask{Header: h(), Deterministic: true}, Decision{}},
		{"mode request, asked", Config{Mode: ModeRequest}, Ask{Header: h(Header, "Use"), Deterministic: true}, Decision{true, true}},
		{"other key", Config{Keys: []string{"ci", "12"}}, Ask{Header: h(), TokenID: 3, TokenName: "dev", Deterministic: true}, Decision{}},
		{"key by name", Config{Keys: []string{"ci", "12"}}, Ask{Header: h(), TokenID: 3, TokenName: "ci", Deterministic: true}, Decision{true, true}},
		{"key by id", Config{Keys: []string{"ci", "12"}}, Ask{Header: h(), TokenID: 12, Deterministic: true}, Decision{true, true}},
		{"plan", Config{Plans: []string{"pro"}}, Ask{Header: h(), Plan: "pro", Deterministic: true}, Decision{true, true}},
		{"other plan", Config{Plans: []string{"pro"}}, Ask{Header: h(), Plan: "basic", Deterministic: true}, Decision{}},
	}
	for _, tc := range cases {
		tc.c.Enable = true
		c.Config = tc.c.withDefaults()
		if got := c.Decide(tc.ask); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if (*Cache)(nil).Decide(Ask{Deterministic: true}) != (Decision{}) || New(&Config{}, NewMemory(1), nil) != nil {
		t.Error("a cache that is off is used")
	}
}

func TestConfigSetAndCharge(t *testing.T) {
	var c Config
	for _, o := range [][]string{{"enable"}, {"ttl", "90s"}, {"max_bytes", "2MiB"}, {"max_entry_bytes", "64KiB"}, {"scope", "key"},
		{"bill", "12.5%"}, {"replay", "pace"}, {"force"}, {"mode", "request"}, {"keys", "ci", "7"}, {"plans", "pro"}, {"store", "database"}} {
		if err := c.Set(o[0], o[1:]); err != nil {
			t.Fatalf("%v: %v", o, err)
		}
	}
	want := Config{Enable: true, TTL: 90 * time.Second, MaxBytes: 2 << 20, MaxEntry: 64 << 10, Scope: ScopeKey, Bill: 1250,
		Replay: ReplayPace, Force: true, Mode: ModeRequest, Keys: []string{"ci", "7"}, Plans: []string{"pro"}}
	if c.TTL != want.TTL || c.MaxBytes != want.MaxBytes || c.MaxEntry != want.MaxEntry || c.Scope != want.Scope || c.Bill != want.Bill ||
		c.Replay != want.Replay || !c.Force || !c.Enable || c.Mode != want.Mode || len(c.Keys) != 2 || len(c.Plans) != 1 || c.Store != StoreDatabase {
		t.Fatalf("config %+v", c)
	}
	for _, o := range [][]string{{"ttl", "0s"}, {"ttl"}, {"max_bytes", "lots"}, {"scope", "team"}, {"bill", "101%"}, {"bill", "50"},
		{"bill", "-1%"}, {"bill", "1.234%"}, {"replay", "slow"}, {"enable", "yes"}, {"mode", "always"}, {"keys"}, {"size", "1"}, {"store", "redis"}} {
		if err := c.Set(o[0], o[1:]); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
	for _, tc := range []struct {
		bill, full, want int64
	}{{0, 1000, 0}, {10000, 1000, 1000}, {2500, 1000, 250}, {1250, 3, 1}, {3333, 1 << 62, 1537074949941848389}, {5000, 0, 0}} {
		c := Config{Bill: tc.bill}
		if got := c.Charge(tc.full); got != tc.want {
			t.Errorf("%d bp of %d: %d, want %d", tc.bill, tc.full, got, tc.want)
		}
	}
}

var ctx = context.Background()

// fakeResponses is a ResponseStore in a map, for the Database's own logic
// (the SQL is the store contract suite's).
type fakeResponses struct {
	m map[string][]byte
}

func (f *fakeResponses) GetCachedResponse(_ context.Context, key string, _ time.Time) ([]byte, error) {
	if b, ok := f.m[key]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}

func (f *fakeResponses) PutCachedResponse(_ context.Context, key string, entry []byte, _, _ time.Time, maxBytes int64) error {
	if int64(len(entry)) <= maxBytes {
		f.m[key] = entry
	}
	return nil
}

func TestDatabaseRoundTrip(t *testing.T) {
	f := &fakeResponses{m: map[string][]byte{}}
	c := New(&Config{Enable: true, Store: StoreDatabase, MaxBytes: 4096}, NewMemory(1<<20), f)
	d, ok := c.Store.(*Database)
	if !ok {
		t.Fatalf("store database gave %T", c.Store)
	}
	now := time.Now()
	r := c.Record()
	r.ContentType("text/event-stream")
	r.Event([]byte("data: 1\n\n"), now)
	r.Event([]byte("data: [DONE]\n\n"), now.Add(time.Millisecond))
	u := adapters.Usage{PromptTokens: 10, CompletionTokens: 20, CachedTokens: 4}
	if !c.Commit(Key{7}, r, u, "up", now) {
		t.Fatal("not kept")
	}
	for range MaxWriting { // every write done
		d.writing <- struct{}{}
	}
	for range MaxWriting {
		<-d.writing
	}
	e := c.Get(ctx, Key{7})
	if e == nil || string(e.Body) != "data: 1\n\ndata: [DONE]\n\n" || len(e.Events) != 2 || e.Events[0].End != 9 ||
		e.Events[1].At != time.Millisecond || e.Usage != u || e.Channel != "up" || e.ContentType != "text/event-stream" {
		t.Fatalf("read back %+v", e)
	}
	if c.Get(ctx, Key{8}) != nil {
		t.Fatal("a key never kept was found")
	}
	// a full set of writes under way: the answer is dropped, not waited for
	for range MaxWriting {
		d.writing <- struct{}{}
	}
	r = c.Record()
	r.Body("application/json", []byte(`{}`))
	if c.Commit(Key{9}, r, u, "up", now) {
		t.Fatal("kept while every write slot was taken")
	}
}

// BenchmarkKey is the canonical key of a short chat request: what a miss
// pays before the relay.
func BenchmarkKey(b *testing.B) {
	r := Request{Scope: ScopeUser, UserID: 1, Dialect: "openai", Path: "/v1/chat/completions", Model: "gpt-4o-mini",
		Headers: []string{"", "", ""},
		Body:    []byte(`{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := KeyOf(&r); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzKey: the canonical key never panics, and a JSON object respaced
// (json.Indent and json.Compact keep every token as written) keeps its key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{`{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}]}`,
		`{"a":"x}]\\\"{","n":{"z":[{"q":"]"},true,-1.5e3]}}`, `{}`, `{"a":[]}`, `{"a":{"b":{"c":null}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := Request{Scope: ScopeUser, Dialect: "openai", Path: "/p", Model: "m", Body: body}
		k, err := KeyOf(&r)
		if err != nil || !json.Valid(body) {
			return
		}
		var spaced, compact bytes.Buffer
		if json.Indent(&spaced, body, " ", "\t") != nil || json.Compact(&compact, body) != nil {
			return
		}
		for _, b := range [][]byte{spaced.Bytes(), compact.Bytes()} {
			r.Body = b
			if k2, err := KeyOf(&r); err != nil || k2 != k {
				t.Fatalf("%q and %q: %v", body, b, err)
			}
		}
	})
}
