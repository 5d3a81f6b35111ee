package engine

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

type rows struct{ admitted, unadmitted []*store.UsageLog }

func (r *rows) Write(row *store.UsageLog)           { r.admitted = append(r.admitted, row) }
func (r *rows) WriteUnadmitted(row *store.UsageLog) { r.unadmitted = append(r.unadmitted, row) }

type meter struct{ costs []int64 }

func (m *meter) Observe(_ *Exchange, _ adapters.Usage, cost int64, _ time.Duration) {
	m.costs = append(m.costs, cost)
}

// A settled request is charged its cost, gives back its reservation, and
// is recorded once in the metrics and once as a usage row, in the slot
// admission took for it.
func TestSettle(t *testing.T) {
	rs, mt := &rows{}, &meter{}
	g := &billing.Gate{Limiter: billing.NewLimiter(), Ledger: billing.NewLedger(), Usage: queue{}}
	e := &Engine{Gate: g, Rows: rs, Meter: mt}
	id := &keys.Identity{User: &store.User{ID: 1, Quota: 1_000_000}, Token: &store.Token{ID: 2}}
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000}
	ad, err := g.Admit(time.Now(), billing.Ask{User: id.User, Token: id.Token, Slot: true, Reserve: billing.Reserve(500)})
	if err != nil {
		t.Fatal(err)
	}
	x := &Exchange{R: httptest.NewRequest("POST", "/v1/chat/completions", nil), ID: id, Start: time.Now(), Channel: "a", Status: 200,
		Req: &adapters.Request{Op: adapters.OpChat, Model: "m"}, Price: price, Hold: ad.Hold, Ticket: ad.Ticket, Slot: ad.Slot,
		Usage: adapters.Usage{PromptTokens: 10, CompletionTokens: 20}}
	e.Settle(x)
	want := price.Cost(adapters.Usage{PromptTokens: 10, CompletionTokens: 20})
	if len(rs.admitted) != 1 || len(rs.unadmitted) != 0 || rs.admitted[0].Cost != want || rs.admitted[0].Endpoint != "/v1/chat/completions" {
		t.Fatalf("rows %+v %+v, want one admitted row costing %d", rs.admitted, rs.unadmitted, want)
	}
	if len(mt.costs) != 1 || mt.costs[0] != want {
		t.Fatalf("metrics saw %v", mt.costs)
	}
	if avail, _ := g.Ledger.Available(1); avail != 1_000_000-want {
		t.Fatalf("available %d after a cost of %d", avail, want)
	}
}

type queue struct{}

func (queue) Admit(bool) error { return nil }
