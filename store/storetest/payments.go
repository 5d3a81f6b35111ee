package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

func mustPayment(t *testing.T, s store.Store, userID int64, ref string, units, amount int64) *store.Payment {
	t.Helper()
	p := &store.Payment{Provider: "stripe", Reference: ref, UserID: userID, Item: "usd10", Units: units, Amount: amount, Currency: "usd"}
	if err := s.CreatePayment(context.Background(), p); err != nil {
		t.Fatalf("create payment %s: %v", ref, err)
	}
	return p
}

func paid(p *store.Payment, event string) *store.PaymentEvent {
	return &store.PaymentEvent{Provider: p.Provider, ID: event, Kind: store.PaymentEventPaid, Reference: p.Reference,
		Checkout: "cs_" + p.Reference, Charge: "pi_" + p.Reference, Amount: p.Amount, Currency: p.Currency}
}

// A paid event credits the payment's units once, in the transaction that
// records it: its replay is ErrConflict and changes nothing; a second paid
// event of the paid payment is recorded and credits nothing; every step
// has its audit entry; the invitee's payment pays the inviter's reward.
func testPaymentCreditedOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter := mustUser(t, s, "inviter", 0)
	u := &store.User{Username: "payer", Quota: 5, InvitedBy: inviter.ID}
	if err := s.RegisterUser(ctx, u, store.InvitationReward{Amount: 250, MinPayment: 1}); err != nil {
		t.Fatal(err)
	}
	p := mustPayment(t, s, u.ID, "pay_1", 10_000_000, 1_000)
	if p.ID == 0 || p.Status != store.PaymentPending || p.CreatedAt.IsZero() {
		t.Fatalf("created %+v", p)
	}
	got, delta, err := s.ApplyPaymentEvent(ctx, paid(p, "evt_1"))
	if err != nil {
		t.Fatal(err)
	}
	if delta != 10_000_000 || got.Status != store.PaymentPaid || got.Charge != "pi_pay_1" || got.Checkout != "cs_pay_1" {
		t.Fatalf("paid: delta %d, payment %+v", delta, got)
	}
	if q := mustGetUser(t, s, u.ID).Quota; q != 10_000_005 {
		t.Fatalf("quota %d, want 10000005", q)
	}
	if q := mustGetUser(t, s, inviter.ID).InvitationQuota; q != 250 {
		t.Fatalf("inviter's invitation quota %d, want 250", q)
	}
	if _, _, err := s.ApplyPaymentEvent(ctx, paid(p, "evt_1")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("replayed event: %v, want ErrConflict", err)
	}
	if _, delta, err := s.ApplyPaymentEvent(ctx, paid(p, "evt_2")); err != nil || delta != 0 {
		t.Fatalf("second paid event: delta %d, %v; want 0, nil", delta, err)
	}
	if q := mustGetUser(t, s, u.ID).Quota; q != 10_000_005 {
		t.Fatalf("quota %d after replays, want 10000005", q)
	}
	back, err := s.PaymentByReference(ctx, "pay_1")
	if err != nil || back.Status != store.PaymentPaid || back.Units != 10_000_000 || back.UserID != u.ID {
		t.Fatalf("read back %+v, %v", back, err)
	}
	entries, err := s.ListAudit(ctx, store.AuditFilter{Action: "payment."})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Actor+" "+e.Target)
	}
	want := []string{"payment.paid stripe user:" + strconv.FormatInt(u.ID, 10), "payment.paid stripe user:" + strconv.FormatInt(u.ID, 10), "payment.checkout payer user:" + strconv.FormatInt(u.ID, 10)}
	if len(actions) != len(want) || actions[0] != want[0] || actions[2] != want[2] {
		t.Fatalf("audit %q, want %q", actions, want)
	}
	var after map[string]any
	if err := json.Unmarshal(entries[1].After, &after); err != nil || after["quota_delta"] != float64(10_000_000) || after["event"] != "evt_1" {
		t.Fatalf("paid entry's after %s (%v)", entries[1].After, err)
	}
	list, err := s.ListPayments(ctx, u.ID, 0)
	if err != nil || len(list) != 1 || list[0].Reference != "pay_1" {
		t.Fatalf("list %v, %v", list, err)
	}
}

// Refunds take back what their running total is worth, rounded up, once
// each; a dispute takes its amount's worth; together never more than the
// payment credited, and the balance may go below zero.
func testPaymentRefundsAndDisputes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "refunded", 0)
	p := mustPayment(t, s, u.ID, "pay_r", 10_000_000, 3_000) // 30.00 for 10 USD of units
	if _, _, err := s.ApplyPaymentEvent(ctx, paid(p, "evt_paid")); err != nil {
		t.Fatal(err)
	}
	// spent 9 USD of it
	if err := s.AddQuota(ctx, u.ID, -9_000_000); err != nil {
		t.Fatal(err)
	}
	refund := func(id string, total int64) (*store.Payment, int64) {
		t.Helper()
		got, delta, err := s.ApplyPaymentEvent(ctx, &store.PaymentEvent{Provider: "stripe", ID: id, Kind: store.PaymentEventRefunded,
			Charge: "pi_pay_r", Amount: total, Currency: "usd"})
		if err != nil {
			t.Fatal(err)
		}
		return got, delta
	}
	// 10.00 of 30.00: a third of 10,000,000 units, rounded up
	if got, delta := refund("evt_r1", 1_000); delta != -3_333_334 || got.Status != store.PaymentPartiallyRefunded || got.Refunded != 3_333_334 {
		t.Fatalf("first refund: delta %d, %+v", delta, got)
	}
	if q := mustGetUser(t, s, u.ID).Quota; q != 1_000_000-3_333_334 {
		t.Fatalf("quota %d, want %d (below zero)", q, 1_000_000-3_333_334)
	}
	// the running total 20.00: two thirds, less what the first took
	if _, delta := refund("evt_r2", 2_000); delta != -3_333_333 {
		t.Fatalf("second refund: delta %d, want -3333333", delta)
	}
	dispute, delta, err := s.ApplyPaymentEvent(ctx, &store.PaymentEvent{Provider: "stripe", ID: "evt_d", Kind: store.PaymentEventDisputed,
		Charge: "pi_pay_r", Amount: 3_000, Currency: "usd"})
	if err != nil {
		t.Fatal(err)
	}
	// the dispute is for all of it, but only a third is left to take
	if delta != -3_333_333 || dispute.Status != store.PaymentDisputed || dispute.Refunded+dispute.Disputed != 10_000_000 {
		t.Fatalf("dispute: delta %d, %+v", delta, dispute)
	}
	if _, delta := refund("evt_r3", 3_000); delta != 0 {
		t.Fatalf("a refund after all was taken: delta %d, want 0", delta)
	}
	if q := mustGetUser(t, s, u.ID).Quota; q != -9_000_000 {
		t.Fatalf("quota %d, want -9000000: the payment's units all taken back from what was left", q)
	}
	entries, err := s.ListAudit(ctx, store.AuditFilter{Action: store.AuditPaymentRefunded})
	if err != nil || len(entries) != 3 {
		t.Fatalf("refund audit entries %d, %v; want 3", len(entries), err)
	}
	if entries, err := s.ListAudit(ctx, store.AuditFilter{Action: store.AuditPaymentDisputed}); err != nil || len(entries) != 1 {
		t.Fatalf("dispute audit entries %d, %v; want 1", len(entries), err)
	}
}

// What is refused changes nothing: a paid event of another amount or
// currency, an event naming no payment (and its id stays free), a payment
// of no user, a reference stored twice.
func testPaymentRefusals(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "careful", 7)
	p := mustPayment(t, s, u.ID, "pay_x", 1_000_000, 100)
	wrong := paid(p, "evt_wrong")
	wrong.Amount = 1
	if _, _, err := s.ApplyPaymentEvent(ctx, wrong); !errors.Is(err, store.ErrPaymentMismatch) {
		t.Fatalf("underpaid: %v, want ErrPaymentMismatch", err)
	}
	wrong = paid(p, "evt_wrong")
	wrong.Currency = "eur"
	if _, _, err := s.ApplyPaymentEvent(ctx, wrong); !errors.Is(err, store.ErrPaymentMismatch) {
		t.Fatalf("another currency: %v, want ErrPaymentMismatch", err)
	}
	other := paid(p, "evt_other")
	other.Provider = "epay"
	if _, _, err := s.ApplyPaymentEvent(ctx, other); !isNotFound(err) {
		t.Fatalf("another provider's event: %v, want ErrNotFound", err)
	}
	if _, _, err := s.ApplyPaymentEvent(ctx, &store.PaymentEvent{Provider: "stripe", ID: "evt_nobody", Kind: store.PaymentEventRefunded,
		Charge: "pi_unknown", Amount: 100, Currency: "usd"}); !isNotFound(err) {
		t.Fatalf("refund of no payment: %v, want ErrNotFound", err)
	}
	if got := mustGetUser(t, s, u.ID).Quota; got != 7 {
		t.Fatalf("quota %d after refusals, want 7", got)
	}
	// none of the refused ids was kept: the right event under one applies
	right := paid(p, "evt_wrong")
	if _, delta, err := s.ApplyPaymentEvent(ctx, right); err != nil || delta != 1_000_000 {
		t.Fatalf("the right event: %d, %v", delta, err)
	}
	if err := s.CreatePayment(ctx, &store.Payment{Provider: "stripe", Reference: "pay_x", UserID: u.ID, Item: "a", Units: 1, Amount: 1, Currency: "usd"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a reference twice: %v, want ErrConflict", err)
	}
	if err := s.CreatePayment(ctx, &store.Payment{Provider: "stripe", Reference: "pay_ghost", UserID: 9999, Item: "a", Units: 1, Amount: 1, Currency: "usd"}); !isNotFound(err) {
		t.Fatalf("a payment of no user: %v, want ErrNotFound", err)
	}
	if _, err := s.PaymentByReference(ctx, "pay_ghost"); !isNotFound(err) {
		t.Fatalf("the refused payment was kept: %v", err)
	}
	for _, bad := range []*store.Payment{
		{Reference: "r", UserID: u.ID, Units: 1, Amount: 1, Currency: "usd"},
		{Provider: "stripe", Reference: "r", UserID: u.ID, Units: 0, Amount: 1, Currency: "usd"},
		{Provider: "stripe", Reference: "r", UserID: u.ID, Units: 1, Amount: 1},
	} {
		if err := s.CreatePayment(ctx, bad); err == nil {
			t.Fatalf("created %+v", bad)
		}
	}
}

// One event delivered to several instances at once is applied by one.
func testInstancesPaymentEventOnce(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	s := stores[0]
	u := mustUser(t, s, "racer", 0)
	p := mustPayment(t, s, u.ID, "pay_race", 2_000_000, 200)
	var won, lost atomic.Int32
	race(stores, 24, func(_ int, s store.Store) {
		_, _, err := s.ApplyPaymentEvent(ctx, paid(p, "evt_race"))
		switch {
		case err == nil:
			won.Add(1)
		case errors.Is(err, store.ErrConflict):
			lost.Add(1)
		default:
			t.Error(err)
		}
	})
	if won.Load() != 1 || lost.Load() != 23 {
		t.Fatalf("won %d lost %d, want 1 and 23", won.Load(), lost.Load())
	}
	if got := mustGetUser(t, s, u.ID).Quota; got != 2_000_000 {
		t.Fatalf("quota %d, want 2000000", got)
	}
}
