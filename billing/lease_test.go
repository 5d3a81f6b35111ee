package billing_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/internal/pgtest"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/postgres"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// Several ledgers on one database, as several gateway instances: each test
// runs on a SQLite file and on a throwaway PostgreSQL cluster.

// shared opens n stores on one fresh database of the driver's.
type shared func(t *testing.T, n int) []store.Store

func drivers() map[string]shared {
	open := func(t *testing.T, n int, openOne func(string) (store.Store, error), dsn string) []store.Store {
		stores := make([]store.Store, n)
		for i := range stores {
			st, err := openOne(dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			stores[i] = st
		}
		return stores
	}
	return map[string]shared{
		"sqlite": func(t *testing.T, n int) []store.Store {
			return open(t, n, sqlite.Open, filepath.Join(t.TempDir(), "shared.db"))
		},
		"postgres": func(t *testing.T, n int) []store.Store {
			return open(t, n, postgres.Open, pgtest.Start(t))
		},
	}
}

// instance is one gateway's billing: a leased ledger, its usage writer and
// its gate, on a store of its own.
type instance struct {
	ledger *billing.Ledger
	writer *billing.Writer
	gate   *billing.Gate
	stop   context.CancelFunc
	done   chan struct{}
}

func startInstance(t *testing.T, st store.Store, journal string, cfg billing.LeaseConfig, renew bool) *instance {
	in := &instance{ledger: billing.NewLeasedLedger(st, cfg), done: make(chan struct{})}
	in.writer = billing.NewWriter(st, in.ledger, zap.NewNop(), billing.WriterConfig{Journal: journal, Linger: time.Millisecond, RetryInterval: 20 * time.Millisecond})
	in.gate = &billing.Gate{Limiter: billing.NewLimiter(), Ledger: in.ledger, Usage: in.writer}
	ctx, cancel := context.WithCancel(context.Background())
	in.stop = cancel
	go func() {
		defer close(in.done)
		if renew {
			in.ledger.RunLeases(ctx)
		}
	}()
	return in
}

// shutdown stops the instance as the gateway does: renewals, then the
// writer, then the leases given back.
func (in *instance) shutdown(t *testing.T) {
	in.stop()
	<-in.done
	in.writer.Close()
	if err := in.ledger.ReleaseLeases(); err != nil {
		t.Errorf("release leases: %v", err)
	}
}

// request is one request through an instance's gate: admitted for
// reserve, it costs cost and writes its row; refused, it writes a row of
// nothing. It reports whether it was admitted.
func (in *instance) request(t *testing.T, u *store.User, tok *store.Token, reserve, cost int64) bool {
	ad, err := in.gate.Admit(time.Now(), billing.Ask{User: u, Token: tok, Slot: true, Reserve: billing.Reserve(reserve)})
	var quota *billing.QuotaRefusal
	switch {
	case err == nil:
		in.gate.Settle(time.Now(), ad, 0, cost)
		in.writer.Write(&store.UsageLog{UserID: u.ID, TokenID: tok.ID, Model: "m", Cost: cost, Status: 200})
		return true
	case errors.As(err, &quota):
		in.gate.Settle(time.Now(), ad, 0, 0)
		in.writer.Write(&store.UsageLog{UserID: u.ID, TokenID: tok.ID, Model: "m", Status: 429})
		return false
	}
	t.Errorf("admission: %v", err)
	return false
}

// usage reads every row of the database.
func usage(t *testing.T, st store.Store) []*store.UsageLog {
	var all []*store.UsageLog
	var after int64
	for {
		rows, err := st.UsageSince(context.Background(), time.Time{}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			return all
		}
		all = append(all, rows...)
		after = rows[len(rows)-1].ID
	}
}

func setupUser(t *testing.T, st store.Store, quota int64) (*store.User, *store.Token) {
	u := &store.User{Username: "hammered", PasswordHash: "x", Quota: quota}
	if err := st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{UserID: u.ID, Name: "k", KeyHash: "hash", KeyPrefix: "sk-h"}
	if err := st.CreateToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	return u, tok
}

// One user hammered through three instances until the quota is spent: the
// rows' costs add up exactly to what left the balance, every admitted
// request has its row, and the balance never goes below zero (each cost
// is within its reservation, so nothing in flight costs more than held).
func TestLeasedLedgersSpendOneBalanceOnce(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			const (
				quota   = 200_000
				reserve = 1_000
			)
			stores := open(t, 3)
			u, tok := setupUser(t, stores[0], quota)
			cfg := billing.LeaseConfig{Renew: 30 * time.Millisecond, TTL: 5 * time.Second, Min: 2_000, Max: 5_000}
			var admitted, spent atomic.Int64
			var wg sync.WaitGroup
			var ins []*instance
			for i, st := range stores {
				c := cfg
				c.Owner = "instance-" + string(rune('a'+i))
				in := startInstance(t, st, filepath.Join(t.TempDir(), "journal"), c, true)
				ins = append(ins, in)
				for w := range 4 {
					wg.Go(func() {
						// until refused for longer than a few renewals,
						// when no lease anywhere can hold a request more
						var refusedSince time.Time
						for n := 0; ; n++ {
							cost := int64(500 + (n*37+w*101)%501) // 500..1000, within the reservation
							if in.request(t, u, tok, reserve, cost) {
								admitted.Add(1)
								spent.Add(cost)
								refusedSince = time.Time{}
								continue
							}
							if refusedSince.IsZero() {
								refusedSince = time.Now()
							} else if time.Since(refusedSince) > 10*cfg.Renew {
								return
							}
							time.Sleep(time.Millisecond)
						}
					})
				}
			}
			wg.Wait()
			for _, in := range ins {
				in.shutdown(t)
			}
			rows := usage(t, stores[0])
			var cost, ok int64
			keys := map[string]bool{}
			for _, r := range rows {
				cost += r.Cost
				if r.Status == 200 {
					ok++
				}
				if keys[r.Key] {
					t.Errorf("row %s twice", r.Key)
				}
				keys[r.Key] = true
			}
			final := mustUser(t, stores[1], u.ID)
			t.Logf("%d admitted, %d rows, %d spent, balance %d", admitted.Load(), len(rows), cost, final.Quota)
			if ok != admitted.Load() || cost != spent.Load() {
				t.Fatalf("rows: %d admitted costing %d, want %d costing %d", ok, cost, admitted.Load(), spent.Load())
			}
			if final.Quota != quota-cost || final.UsedQuota != cost {
				t.Fatalf("balance %d, used %d; the rows cost %d of %d", final.Quota, final.UsedQuota, cost, quota)
			}
			if final.Quota < 0 || final.Quota >= reserve {
				t.Fatalf("balance %d: want it spent down to less than one reservation, never below zero", final.Quota)
			}
			// every lease was given back
			grant, err := stores[2].LeaseBalances(context.Background(), "after", time.Now().Add(time.Minute),
				[]store.LeaseRequest{{Account: store.LeaseAccount{ID: u.ID}, Want: quota}})
			if err != nil || grant[0].Amount != final.Quota {
				t.Fatalf("after shutdown a lease of everything got %+v, %v; want the whole balance %d", grant, err, final.Quota)
			}
		})
	}
}

func mustUser(t *testing.T, st store.Store, id int64) *store.User {
	u, err := st.UserByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// failingStore refuses every commit, as a database an instance lost.
type failingStore struct{ store.Store }

func (failingStore) SettleBatch(context.Context, []*store.UsageLog) error {
	return errors.New("connection refused")
}

// An instance killed with rows only in its journal: its lease comes back
// when it runs out and another instance spends the balance; the journal
// replayed afterwards charges the balance directly, each row once, so it
// goes below zero by at most what the killed instance had in flight.
func TestKilledInstancesLeaseComesBack(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			const quota, reserve = 10_000, 1_000
			stores := open(t, 2)
			u, tok := setupUser(t, stores[0], quota)
			ttl := 600 * time.Millisecond
			journal := filepath.Join(t.TempDir(), "journal")
			// the killed one: its commits fail, so its rows wait in its
			// journal; nothing renews its lease
			killed := startInstance(t, failingStore{stores[0]}, journal,
				billing.LeaseConfig{Owner: "killed", TTL: ttl, Renew: time.Hour, Min: quota}, false)
			for range 3 {
				if !killed.request(t, u, tok, reserve, reserve) {
					t.Fatal("refused on a full balance")
				}
			}
			killed.writer.Close() // its rows journaled; its leases never given back
			leased := time.Now()

			alive := startInstance(t, stores[1], filepath.Join(t.TempDir(), "journal"),
				billing.LeaseConfig{Owner: "alive", TTL: time.Minute, Renew: 50 * time.Millisecond}, true)
			defer alive.shutdown(t)
			if alive.request(t, u, tok, reserve, reserve) {
				t.Fatal("admitted against a slice another instance holds")
			}
			spent := 0
			for time.Since(leased) < 3*ttl && spent < quota {
				if alive.request(t, u, tok, reserve, reserve) {
					spent += reserve
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
			if spent != quota {
				t.Fatalf("the killed instance's lease did not come back: %d of %d spent", spent, quota)
			}
			alive.writer.Close()

			// the killed instance starts again: its journal is replayed, twice
			// over (a copy replayed by another start), charged once
			b, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			again := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(again, b, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, j := range []string{journal, again} {
				restarted := startInstance(t, stores[0], j, billing.LeaseConfig{Owner: "restarted"}, false)
				restarted.shutdown(t)
			}
			final := mustUser(t, stores[1], u.ID)
			rows := usage(t, stores[1])
			var cost, ok int64
			for _, r := range rows {
				cost += r.Cost
				if r.Status == 200 {
					ok++
				}
			}
			if ok != 3+quota/reserve || cost != 3*reserve+quota || final.Quota != quota-cost {
				t.Fatalf("%d rows answered costing %d, balance %d", ok, cost, final.Quota)
			}
			if final.Quota < -3*reserve {
				t.Fatalf("balance %d: below zero by more than the killed instance had in flight (%d)", final.Quota, 3*reserve)
			}
		})
	}
}

// countingStore counts lease calls.
type countingStore struct {
	store.Store
	leases atomic.Int64
}

func (c *countingStore) LeaseBalances(ctx context.Context, owner string, until time.Time, reqs []store.LeaseRequest) ([]store.Lease, error) {
	c.leases.Add(1)
	return c.Store.LeaseBalances(ctx, owner, until, reqs)
}

func openTempSQLite(t testing.TB) store.Store {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Admitting against a slice with room makes no store call: only the first
// request (nothing leased yet) and one that does not fit wait on the store.
func TestLeasedAdmitWithRoomMakesNoStoreCall(t *testing.T) {
	st := &countingStore{Store: openTempSQLite(t)}
	u, tok := setupUser(t, st, 1_000_000)
	l := billing.NewLeasedLedger(st, billing.LeaseConfig{Owner: "one", Renew: time.Hour, Min: 10_000, Max: 50_000})
	for i := range 100 {
		h, err := l.Hold(u, tok, 100)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		l.Settle(h, 50)
	}
	if n := st.leases.Load(); n != 1 {
		t.Fatalf("%d store calls for 100 requests within one slice, want 1", n)
	}
	// a request larger than the slice tops it up, once
	if _, err := l.Hold(u, tok, 200_000); err != nil {
		t.Fatal(err)
	}
	if n := st.leases.Load(); n != 2 {
		t.Fatalf("%d store calls after a request past the slice, want 2", n)
	}
	// one past the balance is refused, from memory once the ledger knows
	if _, err := l.Hold(u, tok, 2_000_000); !errors.As(err, new(*billing.QuotaRefusal)) {
		t.Fatalf("past the balance: %v", err)
	}
	if n := st.leases.Load(); n != 2 {
		t.Fatalf("%d store calls after a request past the balance, want 2", n)
	}
}

// A light user holds little, a busy one more, an idle one nothing.
func TestLeaseFollowsSpend(t *testing.T) {
	st := openTempSQLite(t)
	u, tok := setupUser(t, st, 100_000_000)
	renew := 40 * time.Millisecond
	in := startInstance(t, st, filepath.Join(t.TempDir(), "journal"),
		billing.LeaseConfig{Owner: "one", Renew: renew, Min: 1_000, Max: 1_000_000}, true)
	defer in.shutdown(t)
	held := func() int64 {
		// what a second owner cannot lease is what the first holds
		g, err := st.LeaseBalances(context.Background(), "probe", time.Now().Add(time.Minute),
			[]store.LeaseRequest{{Account: store.LeaseAccount{ID: u.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		return mustUser(t, st, u.ID).Quota - g[0].Free
	}
	if !in.request(t, u, tok, 100, 100) {
		t.Fatal("refused")
	}
	if got := held(); got < 100 || got > 2_000 {
		t.Fatalf("a light user's lease holds %d", got)
	}
	// a burst: the lease grows with it
	for range 2_000 {
		if !in.request(t, u, tok, 100, 100) {
			t.Fatal("refused")
		}
	}
	if got := held(); got < 20_000 {
		t.Fatalf("after a burst of 200,000 units the lease holds %d", got)
	}
	// idle: given back within a few renewals of the rate dying down
	deadline := time.Now().Add(100 * renew)
	for held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle user still holds %d", held())
		}
		time.Sleep(renew)
	}
}

// BenchmarkLeasedAdmit is the hot path with leases: a request admitted and
// settled against a slice with room. storecalls/op stays at zero: the
// slice is topped up in the background, ahead of need.
func BenchmarkLeasedAdmit(b *testing.B) {
	st := &countingStore{Store: openTempSQLite(b)}
	u := &store.User{Username: "bench", PasswordHash: "x", Quota: 1 << 50}
	if err := st.CreateUser(context.Background(), u); err != nil {
		b.Fatal(err)
	}
	tok := &store.Token{ID: 1, UserID: u.ID}
	l := billing.NewLeasedLedger(st, billing.LeaseConfig{Owner: "bench", Renew: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.RunLeases(ctx)
	if _, err := l.Hold(u, tok, 1); err != nil {
		b.Fatal(err)
	}
	before := st.leases.Load()
	b.ResetTimer()
	for b.Loop() {
		h, err := l.Hold(u, tok, 100)
		if err != nil {
			b.Fatal(err)
		}
		l.Settle(h, 10)
	}
	b.ReportMetric(float64(st.leases.Load()-before)/float64(b.N), "storecalls/op")
}

// A burst on a cold account: every request misses the empty slice at once
// and tops it up in turn; with the balance ample, none is refused.
func TestLeasedBurstOnAColdAccount(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			st := open(t, 1)[0]
			u, tok := setupUser(t, st, 10_000_000)
			in := startInstance(t, st, filepath.Join(t.TempDir(), "journal"), billing.LeaseConfig{Owner: "one", Min: 1_000}, true)
			defer in.shutdown(t)
			var wg sync.WaitGroup
			var refused atomic.Int64
			for range 200 {
				wg.Go(func() {
					if !in.request(t, u, tok, 2_500, 14) {
						refused.Add(1)
					}
				})
			}
			wg.Wait()
			if n := refused.Load(); n != 0 {
				t.Fatalf("%d of 200 requests refused on a balance that covers them all", n)
			}
		})
	}
}

// pausedStore holds its pauseAt-th lease call until resume is closed: a
// lease call in flight, as on a database a few milliseconds away.
type pausedStore struct {
	store.Store
	calls   atomic.Int64
	pauseAt int64
	entered chan struct{} // closed once the call waits
	resume  chan struct{}
}

func (p *pausedStore) LeaseBalances(ctx context.Context, owner string, until time.Time, reqs []store.LeaseRequest) ([]store.Lease, error) {
	if p.calls.Add(1) == p.pauseAt {
		close(p.entered)
		<-p.resume
	}
	return p.Store.LeaseBalances(ctx, owner, until, reqs)
}

// A request that misses the slice while a renewal that cut it is in
// flight waits for a top-up instead of being refused from memory: the
// part the renewal gives back counts as free meanwhile. (A Realtime
// session's next response on PostgreSQL, whose lease calls take long
// enough for a response to end, was refused with the balance covering it.)
func TestLeasedMissDuringARenewal(t *testing.T) {
	st := &pausedStore{Store: openTempSQLite(t), pauseAt: 2, entered: make(chan struct{}), resume: make(chan struct{})}
	u, tok := setupUser(t, st, 160_000)
	l := billing.NewLeasedLedger(st, billing.LeaseConfig{Owner: "one", Renew: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.RunLeases(ctx)
	// the first lease holds the whole balance; with 40,000 left beside the
	// hold the slice runs low, and the renewal that follows cuts it to
	// what is in flight and waits on the store
	h, err := l.Hold(u, tok, 120_000)
	if err != nil {
		t.Fatal(err)
	}
	<-st.entered
	l.Settle(h, 33_700)
	// 126,300 left: the next 120,000 fits the balance, once the store says so
	done := make(chan error, 1)
	go func() {
		_, err := l.Hold(u, tok, 120_000)
		done <- err
	}()
	close(st.resume)
	if err := <-done; err != nil {
		t.Fatalf("120000 of a balance of 126300, asked during a renewal: %v", err)
	}
}

// A balance spent on two instances, credited by another process: the
// instance that hears of the credit (Credited, as the store's
// announcement calls it) spends it at its next request, without waiting
// for a renewal; one that has not heard refuses from memory until its
// next renewal (none run here).
func TestLeasedCreditHeard(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			stores := open(t, 3)
			u, tok := setupUser(t, stores[0], 0)
			cfg := billing.LeaseConfig{Renew: time.Hour, TTL: 4 * time.Hour}
			var ins []*instance
			for i, st := range stores[:2] {
				cfg.Owner = "instance-" + string(rune('a'+i))
				in := startInstance(t, st, filepath.Join(t.TempDir(), "journal"), cfg, false)
				t.Cleanup(func() { in.shutdown(t) })
				ins = append(ins, in)
			}
			for i, in := range ins {
				if in.request(t, u, tok, 100, 10) {
					t.Fatalf("instance %d admitted a request on an empty balance", i)
				}
			}
			// another process (the CLI, a third instance) credits it
			if err := stores[2].AddQuota(context.Background(), u.ID, 1_000_000); err != nil {
				t.Fatal(err)
			}
			if ins[1].request(t, u, tok, 100, 10) {
				t.Fatal("an instance that has not heard of the credit admitted against it from memory: the test proves nothing")
			}
			ins[0].ledger.Credited(false, u.ID)
			if !ins[0].request(t, u, tok, 100, 10) {
				t.Fatal("the instance that heard of the credit refused the next request")
			}
			// announcements missed (a listening connection back): every
			// account is looked at again
			ins[1].ledger.Credited(false, 0)
			if !ins[1].request(t, u, tok, 100, 10) {
				t.Fatal("after missed announcements, the next request was refused")
			}
		})
	}
}
