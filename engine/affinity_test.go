package engine

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

func TestConversationID(t *testing.T) {
	type ask struct {
		token    int64
		session  string // what the dialect's body says (Anthropic's metadata.user_id)
		cacheKey string
		user     string
		headers  map[string]string
		system   string
		first    string
		later    string // a later turn, which never names the conversation
	}
	id := func(a ask) (string, bool) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		for k, v := range a.headers {
			r.Header.Set(k, v)
		}
		c := &adapters.ChatRequest{CacheKey: a.cacheKey, User: a.user, Session: a.session,
			System: []adapters.Part{{Type: adapters.PartText, Text: a.system}}}
		if a.first != "" {
			c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: a.first}}})
		}
		c.Messages = append(c.Messages, adapters.Message{Role: adapters.RoleAssistant, Parts: []adapters.Part{{Type: adapters.PartText, Text: a.later}}})
		x := &Exchange{R: r, ID: &keys.Identity{Token: &store.Token{ID: a.token}},
			Req: &adapters.Request{Op: adapters.OpChat, Chat: c}}
		got, _, ok := conversationID(x)
		return string(got[:]), ok
	}
	same := func(what string, a, b ask, want bool) {
		t.Helper()
		ia, oka := id(a)
		ib, okb := id(b)
		if !oka || !okb {
			t.Fatalf("%s: no conversation named", what)
		}
		if (ia == ib) != want {
			t.Errorf("%s: same conversation %v, want %v", what, ia == ib, want)
		}
	}
	base := ask{token: 1, system: "s", first: "hello", later: "a"}
	with := func(change func(a *ask)) ask {
		a := base
		a.headers = map[string]string{}
		change(&a)
		return a
	}
	same("later turns differ", base, with(func(a *ask) { a.later = "b" }), true)
	same("first message differs", base, with(func(a *ask) { a.first = "other" }), false)
	same("system differs", base, with(func(a *ask) { a.system = "other" }), false)
	same("another caller's key", base, with(func(a *ask) { a.token = 2 }), false)
	named := func(change func(a *ask)) ask {
		return with(func(a *ask) { change(a); a.first = a.first + "!" })
	}
	same("prompt_cache_key over the start", with(func(a *ask) { a.cacheKey = "k" }), named(func(a *ask) { a.cacheKey = "k" }), true)
	same("prompt_cache_key, another caller", with(func(a *ask) { a.cacheKey = "k" }), named(func(a *ask) { a.cacheKey = "k"; a.token = 2 }), false)
	same("prompt_cache_key before the session header",
		with(func(a *ask) { a.cacheKey = "k"; a.headers["X-Claude-Code-Session-Id"] = "s1" }),
		named(func(a *ask) { a.cacheKey = "k"; a.headers["X-Claude-Code-Session-Id"] = "s2" }), true)
	for _, h := range []string{"X-Claude-Code-Session-Id", "session_id", "X-Session-Id"} {
		same(h, with(func(a *ask) { a.headers[h] = "s" }), named(func(a *ask) { a.headers[h] = "s" }), true)
		same(h+" differs", with(func(a *ask) { a.headers[h] = "s" }), with(func(a *ask) { a.headers[h] = "t" }), false)
	}
	same("Claude Code's header before metadata.user_id",
		with(func(a *ask) { a.session = "u1"; a.headers["X-Claude-Code-Session-Id"] = "s" }),
		named(func(a *ask) { a.session = "u2"; a.headers["X-Claude-Code-Session-Id"] = "s" }), true)
	same("metadata.user_id before X-Session-Id",
		with(func(a *ask) { a.session = "u"; a.headers["X-Session-Id"] = "1" }),
		named(func(a *ask) { a.session = "u"; a.headers["X-Session-Id"] = "2" }), true)
	// OpenAI's user names a person, not a conversation
	same("OpenAI's user", with(func(a *ask) { a.user = "u" }), named(func(a *ask) { a.user = "u" }), false)
	if _, ok := id(with(func(a *ask) { a.first = "" })); ok {
		t.Error("a request without a user message was named by its start")
	}
}

func TestPlanPinnedMoves(t *testing.T) {
	aff := routing.NewAffinity(time.Hour, 100)
	moves := map[string]int{}
	aff.OnMove(func(r string) { moves[r]++ })
	x := func() *Exchange {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Header.Set("X-Session-Id", "s")
		return &Exchange{R: r, ID: &keys.Identity{Token: &store.Token{ID: 7}}, Req: &adapters.Request{Op: adapters.OpChat, Model: "m",
			Chat: &adapters.ChatRequest{Messages: []adapters.Message{{Role: adapters.RoleUser}}}}}
	}
	chans := func(keysOfA ...string) []*routing.Channel {
		return []*routing.Channel{
			{Name: "a", Models: []string{"m"}, Keys: keysOfA},
			{Name: "b", Models: []string{"m"}, Keys: []string{"kb"}},
			{Name: "c", Models: []string{"m"}, Keys: []string{"kc"}},
		}
	}
	e := &Engine{Channels: routing.NewSet(chans("k0", "k1", "k2")), MaxAttempts: 2, Affinity: aff}
	first := x()
	id, _, _ := conversationID(first)
	aff.Bind(id, routing.Binding{Channel: "a", Key: 2, KeySum: routing.KeySum("k2")})
	// bound: channel a first, its key 2, whatever the weighted order
	for range 20 {
		x := x()
		plan := e.planFor(x, nil)
		if len(plan) != 2 || plan[0].Name != "a" {
			t.Fatalf("plan %v, want a first and 2 channels", plan)
		}
		if k := x.upstreamKey(plan[0]); k != "k2" {
			t.Fatalf("key %q, want the bound k2", k)
		}
	}
	step := func(what, reason string) {
		t.Helper()
		x := x()
		e.planFor(x, nil)
		if x.Pin.has || moves[reason] != 1 {
			t.Fatalf("%s: bound %v, moves %v, want one %s", what, x.Pin.has, moves, reason)
		}
		if _, ok := aff.Lookup(id); ok {
			t.Fatalf("%s: the binding was kept", what)
		}
		aff.Bind(id, routing.Binding{Channel: "a", Key: 2, KeySum: routing.KeySum("k2")})
	}
	// a reload that changed a's keys
	e.Channels = routing.NewSet(chans("k0", "k1", "new"))
	step("key replaced", routing.MoveKeyRemoved)
	// a reload without channel a
	e.Channels = routing.NewSet(chans("k0", "k1", "k2")[1:])
	step("channel gone", routing.MoveUnavailable)
	// a channel of higher priority serves the model again
	set := chans("k0", "k1", "k2")
	set[1].Priority = 10
	e.Channels = routing.NewSet(set)
	step("higher priority", routing.MovePriority)
	// a is ejected
	set = chans("k0", "k1", "k2")
	e.Channels = routing.NewSet(set)
	set[0].Failed(routing.DefaultHealthPolicy, time.Now(), time.Minute)
	step("ejected", routing.MoveEjected)
	// operations affinity does not cover take keys in turn
	emb := x()
	emb.Req.Op = adapters.OpEmbedding
	if e.planFor(emb, nil); emb.Pin != nil {
		t.Fatal("an embedding request was pinned")
	}
}

// BenchmarkConversationID is the cost of naming a coding agent's
// conversation by its start: 40 KB of system prompt and 30 tools.
func BenchmarkConversationID(b *testing.B) {
	c := &adapters.ChatRequest{System: []adapters.Part{{Type: adapters.PartText, Text: string(make([]byte, 40<<10))}},
		Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "fix the bug"}}}}}
	for i := range 30 {
		c.Tools = append(c.Tools, adapters.Tool{Type: "function", Name: string(rune('a' + i)), Description: "a tool that does a thing",
			Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)})
	}
	x := &Exchange{R: httptest.NewRequest("POST", "/v1/chat/completions", nil), ID: &keys.Identity{Token: &store.Token{ID: 1}},
		Req: &adapters.Request{Op: adapters.OpChat, Chat: c}}
	b.ReportAllocs()
	for b.Loop() {
		conversationID(x)
	}
}

// TestPlacement: conversations without a binding spread over a channel's
// keys evenly and over channels of one priority by weight, each always to
// the same place.
func TestPlacement(t *testing.T) {
	a := &routing.Channel{Name: "a", Models: []string{"m"}, Weight: 3, Keys: []string{"k0", "k1", "k2", "k3"}}
	b := &routing.Channel{Name: "b", Models: []string{"m"}, Weight: 1, Keys: []string{"kb"}}
	backup := &routing.Channel{Name: "backup", Models: []string{"m"}, Priority: -1, Weight: 100, Keys: []string{"kz"}}
	e := &Engine{Channels: routing.NewSet([]*routing.Channel{a, b, backup}), MaxAttempts: 3, Affinity: routing.NewAffinity(time.Hour, 10)}
	const n = 8000
	channels, keyUse := map[string]int{}, map[string]int{}
	for i := range n {
		pick := func() (string, string) {
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			r.Header.Set("X-Session-Id", "conversation "+strconv.Itoa(i))
			x := &Exchange{R: r, ID: &keys.Identity{Token: &store.Token{ID: 1}}, Req: &adapters.Request{Op: adapters.OpChat, Model: "m",
				Chat: &adapters.ChatRequest{Messages: []adapters.Message{{Role: adapters.RoleUser}}}}}
			plan := e.planFor(x, nil)
			if plan[len(plan)-1] != backup {
				t.Fatalf("plan %v: the lower priority last", plan)
			}
			return plan[0].Name, x.upstreamKey(plan[0])
		}
		ch, key := pick()
		if ch2, key2 := pick(); ch2 != ch || key2 != key {
			t.Fatalf("conversation %d went to %s %s, then %s %s", i, ch, key, ch2, key2)
		}
		channels[ch]++
		if ch == "a" {
			keyUse[key]++
		}
	}
	// weight 3:1
	if channels["a"] < n*70/100 || channels["a"] > n*80/100 {
		t.Errorf("channel a got %d of %d conversations, want about 75%%", channels["a"], n)
	}
	for _, k := range a.Keys {
		if got, want := keyUse[k], channels["a"]/4; got < want*85/100 || got > want*115/100 {
			t.Errorf("key %s got %d conversations, want about %d", k, got, want)
		}
	}
}
