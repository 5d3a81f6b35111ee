package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Each test here runs its callers on several stores sharing one database,
// caller i on store i modulo their number: what one gateway instance
// guarantees with its own locks must hold between instances through the
// database alone.

const instances = 3

// race runs n callers at once, caller i with the store it is given, and
// waits for all of them.
func race(stores []store.Store, n int, call func(i int, s store.Store)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			call(i, stores[i%len(stores)])
		})
	}
	close(start)
	wg.Wait()
}

func testInstancesRedeemOnce(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	s := stores[0]
	u := mustUser(t, s, "r", 0)
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "HOT", Quota: 1_000}}); err != nil {
		t.Fatal(err)
	}
	var won, lost atomic.Int32
	race(stores, 24, func(_ int, s store.Store) {
		_, err := s.Redeem(ctx, "HOT", u.ID)
		switch {
		case err == nil:
			won.Add(1)
		case isNotFound(err):
			lost.Add(1)
		default:
			t.Error(err)
		}
	})
	if won.Load() != 1 || lost.Load() != 23 {
		t.Fatalf("won %d lost %d, want 1 and 23", won.Load(), lost.Load())
	}
	for _, s := range stores {
		if got := mustGetUser(t, s, u.ID); got.Quota != 1_000 {
			t.Fatalf("quota = %d, want 1000", got.Quota)
		}
	}
}

// Payments racing on several instances pay the invitation reward once.
func testInstancesInvitationRewardOnce(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	s := stores[0]
	inviter := mustUser(t, s, "inviter", 0)
	u := &store.User{Username: "invitee", InvitedBy: inviter.ID}
	// any payment pays it, so each racer's could
	if err := s.RegisterUser(ctx, u, store.InvitationReward{Amount: 250, MinPayment: 1}); err != nil {
		t.Fatal(err)
	}
	const payments = 12
	var codes []*store.RedemptionCode
	for i := range payments / 2 {
		codes = append(codes, &store.RedemptionCode{Code: fmt.Sprint("PAY-", i), Quota: 100})
	}
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	race(stores, payments, func(i int, s store.Store) {
		var err error
		if i%2 == 0 {
			_, err = s.Redeem(ctx, codes[i/2].Code, u.ID)
		} else {
			err = s.CreditQuota(ctx, u.ID, 1)
		}
		if err != nil {
			t.Error(err)
		}
	})
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 250 {
		t.Fatalf("inviter's invitation quota = %d, want 250 (paid once)", got.InvitationQuota)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != payments/2*100+payments/2 {
		t.Fatalf("invitee's quota = %d, want %d", got.Quota, payments/2*100+payments/2)
	}
}

func testInstancesTransferInvitationQuota(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	u := &store.User{Username: "inv", InvitationQuota: 1_000}
	if err := stores[0].CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	var moved, refused atomic.Int32
	race(stores, 20, func(_ int, s store.Store) {
		err := s.TransferInvitationQuota(ctx, u.ID, 100)
		switch {
		case err == nil:
			moved.Add(1)
		case errors.Is(err, store.ErrInsufficientQuota):
			refused.Add(1)
		default:
			t.Error(err)
		}
	})
	if moved.Load() != 10 || refused.Load() != 10 {
		t.Fatalf("moved %d refused %d, want 10 and 10", moved.Load(), refused.Load())
	}
	if got := mustGetUser(t, stores[1], u.ID); got.Quota != 1_000 || got.InvitationQuota != 0 {
		t.Fatalf("quota %d invitation %d, want 1000 and 0", got.Quota, got.InvitationQuota)
	}
}

// An administrator's debits from several instances are checked against
// the balance each one is taken from: never below zero.
func testInstancesUpdateUserDebits(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	u := mustUser(t, stores[0], "debited", 1_000)
	var taken, refused atomic.Int32
	race(stores, 20, func(_ int, s store.Store) {
		got, err := s.UpdateUser(ctx, u.ID, store.UserChange{QuotaDelta: -100})
		switch {
		case err == nil:
			taken.Add(1)
			if got.Quota < 0 {
				t.Errorf("a debit left %d", got.Quota)
			}
		case errors.Is(err, store.ErrInsufficientQuota):
			refused.Add(1)
		default:
			t.Error(err)
		}
	})
	if taken.Load() != 10 || refused.Load() != 10 {
		t.Fatalf("taken %d refused %d, want 10 and 10", taken.Load(), refused.Load())
	}
	if got := mustGetUser(t, stores[2], u.ID); got.Quota != 0 {
		t.Fatalf("quota = %d, want 0", got.Quota)
	}
}

// One journal replayed by several instances at once charges each keyed
// row once.
func testInstancesSettleBatchKeyedRowsOnce(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	u := mustUser(t, stores[0], "kay", 1_000_000)
	tok := mustToken(t, stores[0], u.ID, "k1")
	const rows = 20
	batch := func() []*store.UsageLog {
		logs := make([]*store.UsageLog, rows)
		for i := range logs {
			logs[i] = &store.UsageLog{Key: fmt.Sprint("row-", i), UserID: u.ID, TokenID: tok.ID, Cost: int64(i + 1), Status: 200}
		}
		return logs
	}
	race(stores, 9, func(_ int, s store.Store) {
		if err := s.SettleBatch(ctx, batch()); err != nil {
			t.Error(err)
		}
	})
	const cost = rows * (rows + 1) / 2
	got := mustGetUser(t, stores[1], u.ID)
	if got.Quota != 1_000_000-cost || got.UsedQuota != cost || got.RequestCount != rows {
		t.Fatalf("user = %+v; want charged %d for %d rows once", got, cost, rows)
	}
	if gt, err := stores[2].TokenByID(ctx, tok.ID); err != nil || gt.UsedQuota != cost {
		t.Fatalf("token = %+v, %v", gt, err)
	}
	if n, err := stores[0].CountUsage(ctx); err != nil || n != rows {
		t.Fatalf("%d rows, %v; want %d", n, err, rows)
	}
}

// Pollers on several instances lease each due task once, and a lease
// that runs out (its instance died mid-poll) frees the task for another.
func testInstancesLeaseTasks(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	past := time.Now().Add(-time.Minute)
	const tasks = 60
	for i := range tasks {
		if err := stores[i%instances].CreateTask(ctx, &store.Task{ID: fmt.Sprintf("t%02d", i), UserID: 1, NextPollAt: past}); err != nil {
			t.Fatal(err)
		}
	}
	until := time.Now().Add(time.Minute)
	var mu sync.Mutex
	seen := map[string]string{}
	race(stores, 3*instances, func(i int, s store.Store) {
		owner := fmt.Sprint("instance", i%instances, "-poller", i)
		for {
			got, err := s.LeaseTasks(ctx, owner, until, 4)
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) == 0 {
				return
			}
			mu.Lock()
			for _, task := range got {
				if prev, dup := seen[task.ID]; dup {
					t.Errorf("task %s leased by %s and %s", task.ID, prev, owner)
				}
				seen[task.ID] = owner
			}
			mu.Unlock()
		}
	})
	if len(seen) != tasks {
		t.Fatalf("leased %d tasks, want %d", len(seen), tasks)
	}

	if err := stores[0].CreateTask(ctx, &store.Task{ID: "orphan", UserID: 1, NextPollAt: past}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].LeaseTask(ctx, "orphan", "dead", time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].LeaseTask(ctx, "orphan", "alive", until); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a live lease was taken over: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	got, err := stores[1].LeaseTasks(ctx, "alive", until, 10)
	if err != nil || len(got) != 1 || got[0].ID != "orphan" || got[0].LeaseOwner != "alive" {
		t.Fatalf("after the lease ran out: %+v, %v", got, err)
	}
}

func testInstancesFinishTaskOnce(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	u := mustUser(t, stores[0], "bo", 1_000_000)
	tok := mustToken(t, stores[0], u.ID, "tk")
	if err := stores[0].CreateTask(ctx, &store.Task{ID: "task_x", UserID: u.ID, TokenID: tok.ID, Reserved: 300_000}); err != nil {
		t.Fatal(err)
	}
	var settled atomic.Int32
	race(stores, 12, func(i int, s store.Store) {
		task := &store.Task{ID: "task_x", Status: "finished", Progress: 100, Cost: 100_000, Error: fmt.Sprint("attempt ", i)}
		ok, err := s.FinishTask(ctx, task, &store.UsageLog{Status: 200})
		if err != nil {
			t.Error(err)
		}
		if ok {
			settled.Add(1)
		}
	})
	if settled.Load() != 1 {
		t.Fatalf("settled %d times", settled.Load())
	}
	got := mustGetUser(t, stores[1], u.ID)
	if got.Quota != 900_000 || got.UsedQuota != 100_000 || got.RequestCount != 1 {
		t.Fatalf("user: quota %d used %d requests %d", got.Quota, got.UsedQuota, got.RequestCount)
	}
	if gt, _ := stores[2].TokenByID(ctx, tok.ID); gt.UsedQuota != 100_000 {
		t.Fatalf("token used %d", gt.UsedQuota)
	}
	if n, _ := stores[0].CountUsage(ctx); n != 1 {
		t.Fatalf("%d usage rows, want 1", n)
	}
}

// Every kind of money write at once, over an inviter and the user they
// invited, from several instances: none fails (two writes that lock the
// same rows in different orders would deadlock, and the database would
// abort one) and every unit is accounted for.
func testInstancesMixedMoneyWrites(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	s := stores[0]
	const start = 10_000_000
	inviter := mustUser(t, s, "inviter", start)
	u := &store.User{Username: "invitee", Quota: start, InvitedBy: inviter.ID}
	if err := s.RegisterUser(ctx, u, store.InvitationReward{Amount: 50}); err != nil {
		t.Fatal(err)
	}
	users := []*store.User{inviter, u}
	toks := []*store.Token{mustToken(t, s, inviter.ID, "ti"), mustToken(t, s, u.ID, "tu")}
	const rounds = 8
	var codes []*store.RedemptionCode
	for i := range rounds * instances {
		codes = append(codes, &store.RedemptionCode{Code: fmt.Sprint("MIX-", i), Quota: 1_000})
	}
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	const kinds = 5
	race(stores, kinds*instances, func(i int, s store.Store) {
		for r := range rounds {
			var err error
			switch i % kinds {
			case 0: // settle rows of both users, in both orders
				logs := []*store.UsageLog{
					{UserID: u.ID, TokenID: toks[1].ID, Cost: 7},
					{UserID: inviter.ID, TokenID: toks[0].ID, Cost: 3},
				}
				if r%2 == 1 {
					logs[0], logs[1] = logs[1], logs[0]
				}
				err = s.SettleBatch(ctx, logs)
			case 1:
				_, err = s.Redeem(ctx, codes[(i/kinds)*rounds+r].Code, u.ID)
			case 2:
				_, err = s.UpdateUser(ctx, users[r%2].ID, store.UserChange{QuotaDelta: 2})
			case 3:
				id := fmt.Sprint("task-", i, "-", r)
				err = s.CreateTask(ctx, &store.Task{ID: id, UserID: u.ID, TokenID: toks[1].ID, Reserved: 500})
				if err == nil {
					_, err = s.FinishTask(ctx, &store.Task{ID: id, Status: "finished", Cost: 200}, &store.UsageLog{Status: 200})
				}
			case 4:
				err = s.CreditQuota(ctx, users[r%2].ID, 5)
			}
			if err != nil {
				t.Errorf("caller %d round %d: %v", i, r, err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	const perKind = instances * rounds
	wantInvitee := int64(start) - perKind*7 + perKind*1_000 + perKind/2*2 - perKind*200 + perKind/2*5
	wantInviter := int64(start) - perKind*3 + perKind/2*2 + perKind/2*5
	gotU, gotI := mustGetUser(t, s, u.ID), mustGetUser(t, s, inviter.ID)
	if gotU.Quota != wantInvitee || gotU.UsedQuota != perKind*(7+200) || gotU.RequestCount != 2*perKind {
		t.Errorf("invitee: quota %d used %d requests %d; want %d %d %d", gotU.Quota, gotU.UsedQuota,
			gotU.RequestCount, wantInvitee, perKind*(7+200), 2*perKind)
	}
	if gotI.Quota != wantInviter || gotI.InvitationQuota != 50 || gotI.UsedQuota != perKind*3 {
		t.Errorf("inviter: quota %d invitation %d used %d; want %d 50 %d", gotI.Quota, gotI.InvitationQuota,
			gotI.UsedQuota, wantInviter, perKind*3)
	}
	for i, want := range []int64{perKind * 3, perKind * (7 + 200)} {
		if tok, err := s.TokenByID(ctx, toks[i].ID); err != nil || tok.UsedQuota != want {
			t.Errorf("token %d: %+v, %v; want used %d", i, tok, err, want)
		}
	}
}
