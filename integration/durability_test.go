package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// billingConfig is one OpenAI channel serving a priced model
// (gpt-4o-mini: 10 prompt + 20 completion tokens from the fake cost 14
// units) and a free one, with the database at {{DSN}} and the test's own
// gateway option extra ("" for none).
func billingConfig(extra string) *caddyfile {
	return gatewayConfig().
		withDatabase("{{DSN}}").
		option("token_cache_ttl 1s").
		option(extra).
		channel("up", "openai", "{{UP}}", "sk-up", "gpt-4o-mini free-model").
		price("gpt-4o-mini", "input 0.15", "output 0.60").
		free("free-model")
}

type billingSetup struct {
	gw   *gatewaytest.Gateway
	up   *gatewaytest.FakeOpenAI
	vars gatewaytest.Vars
	cfg  *caddyfile
}

// startBilling starts the gateway; dsn may name {{DB}} with SQLite URI
// parameters, extra is gateway options.
func startBilling(t *testing.T, dsn, extra string) *billingSetup {
	t.Helper()
	s := &billingSetup{up: gatewaytest.NewFakeOpenAI(t, "sk-up")}
	s.vars = gatewaytest.Vars{"UP": s.up.URL, "DSN": dsn}
	s.cfg = billingConfig(extra)
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	return s
}

// shortBusy makes the gateway's own SQLite connection give up on a held
// lock after 100ms instead of 5s, so a locked database fails batches fast.
const shortBusy = "file:{{DB}}?_busy_timeout=100"

type reply struct {
	status int
	header http.Header
	body   string
}

// chat sends one chat request with plain HTTP (no SDK retries).
func chat(t *testing.T, gw *gatewaytest.Gateway, key, model string, stream bool) reply {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%v}`, model, stream)
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("request: %v", err) // status 0: the caller decides
		return reply{}
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return reply{resp.StatusCode, resp.Header, b.String()}
}

// load sends requests from workers until stop is closed and counts the
// answers by status.
type load struct {
	mu     sync.Mutex
	counts map[int]int
	wg     sync.WaitGroup
	stop   chan struct{}
	sent   atomic.Int64
}

func startLoad(t *testing.T, gw *gatewaytest.Gateway, key, model string, workers int) *load {
	l := &load{counts: map[int]int{}, stop: make(chan struct{})}
	for i := 0; i < workers; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				r := chat(t, gw, key, model, false)
				l.mu.Lock()
				l.counts[r.status]++
				l.mu.Unlock()
				l.sent.Add(1)
			}
		}()
	}
	return l
}

// waitSent waits until n more requests were answered.
func (l *load) waitSent(t *testing.T, n int64) {
	t.Helper()
	target := l.sent.Load() + n
	eventually(t, "requests to be answered", func() bool { return l.sent.Load() >= target })
}

func (l *load) finish() map[int]int {
	close(l.stop)
	l.wg.Wait()
	return l.counts
}

// checkBooks waits for want rows of the user and checks that they, the
// user's balance and used quota agree to the unit, with no row twice.
func checkBooks(t *testing.T, gw *gatewaytest.Gateway, user string, quota int64, want int, wantOK int) {
	t.Helper()
	rows := gw.WaitUsage(user, want)
	var cost int64
	ok := 0
	keys := map[string]bool{}
	for _, r := range rows {
		cost += r.Cost
		if r.Status == 200 {
			ok++
			if r.Cost != 14 {
				t.Errorf("a 200 row cost %d, want 14: %+v", r.Cost, r)
			}
		}
		if r.Key != "" && keys[r.Key] {
			t.Errorf("row %s written twice", r.Key)
		}
		keys[r.Key] = true
	}
	u := gw.User(user)
	if len(rows) != want || ok != wantOK || cost != int64(wantOK)*14 || u.UsedQuota != cost || u.Quota != quota-cost || u.RequestCount != int64(want) {
		t.Fatalf("books: %d rows (%d ok) costing %d; user used %d, quota %d, %d requests; want %d rows, %d ok, cost %d",
			len(rows), ok, cost, u.UsedQuota, u.Quota, u.RequestCount, want, wantOK, int64(wantOK)*14)
	}
}

func journalRows(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// TestDatabaseLockedMidLoad: another process holds the database's write
// lock while requests keep coming; their rows go to the journal, and once
// the lock is gone they reach the database, each once, balances exact.
func TestDatabaseLockedMidLoad(t *testing.T) {
	s := startBilling(t, shortBusy, block("usage", "retry_interval 50ms"))
	const quota = 100_000_000
	key := s.gw.AddUser("lena", quota)
	journal := s.gw.DBPath + ".usage-journal"
	l := startLoad(t, s.gw, key, "gpt-4o-mini", 4)
	l.waitSent(t, 50)
	unlock := s.gw.LockDatabase(s.gw.DBPath)
	// wait until rows are journaled, and more requests served meanwhile
	eventually(t, "rows in the journal", func() bool { return journalRows(t, journal) >= 50 })
	l.waitSent(t, 50)
	unlock()
	l.waitSent(t, 50)
	counts := l.finish()
	total := 0
	for _, n := range counts {
		total += n
	}
	if counts[200] != total {
		t.Fatalf("answers %v: every request should have been served", counts)
	}
	checkBooks(t, s.gw, "lena", quota, total, total)
	eventually(t, "the journal to be emptied", func() bool { return journalRows(t, journal) == 0 })
	// the line is written just after the journal is cleared, and reaches
	// the test through the gateway's stderr: wait for it as for the rest
	eventually(t, "the replay to be logged", func() bool {
		return strings.Contains(s.gw.Logs(), "usage journal replayed into the store")
	})
}

// TestDatabaseDiskFaultsMidLoad: the disk under the database fails mid
// load (full, an I/O error, mounted read-only: injected below SQLite, in
// libc's writes and syncs, since as root a read-only mode bit stops
// nothing), then heals. Requests keep being served, their rows wait in the
// journal (on another disk), and once the database takes writes again
// every row reaches it once and the balance is exact.
func TestDatabaseDiskFaultsMidLoad(t *testing.T) {
	sqliteSays := map[string]string{"ENOSPC": "database or disk is full", "EIO": "disk I/O error: input/output error",
		"EROFS": "disk I/O error: read-only file system"}
	for _, errno := range []string{"ENOSPC", "EIO", "EROFS"} {
		t.Run(errno, func(t *testing.T) {
			up := gatewaytest.NewFakeOpenAI(t, "sk-up")
			journal := filepath.Join(t.TempDir(), "usage-journal")
			gw, disk := gatewaytest.StartWithDiskFaults(t,
				billingConfig(block("usage", "journal "+journal, "retry_interval 50ms")).String(),
				gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
			const quota = 100_000_000
			key := gw.AddUser("dora", quota)
			l := startLoad(t, gw, key, "gpt-4o-mini", 4)
			l.waitSent(t, 30)
			disk.Fail(errno)
			eventually(t, "rows in the journal", func() bool { return journalRows(t, journal) >= 30 })
			l.waitSent(t, 30)
			disk.Heal()
			l.waitSent(t, 30)
			counts := l.finish()
			total := 0
			for _, n := range counts {
				total += n
			}
			if counts[200] != total {
				t.Fatalf("answers %v: every request should have been served", counts)
			}
			checkBooks(t, gw, "dora", quota, total, total)
			eventually(t, "the journal to be emptied", func() bool { return journalRows(t, journal) == 0 })
			// SQLite itself saw the fault
			if !strings.Contains(gw.Logs(), sqliteSays[errno]) {
				t.Fatalf("the gateway never logged SQLite's %q", sqliteSays[errno])
			}
			// written just after the journal is cleared: wait for it too
			eventually(t, "the replay to be logged", func() bool {
				return strings.Contains(gw.Logs(), "usage journal replayed into the store")
			})
		})
	}
}

// TestJournalUnwritableRefusesPricedRequests: the database is locked and
// the journal's disk is full (it is /dev/full); priced requests get 503
// with Retry-After, free ones still work, and every priced request that
// was relayed is billed once the database is back.
func TestJournalUnwritableRefusesPricedRequests(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("needs /dev/full")
	}
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	if err := os.Symlink("/dev/full", journal); err != nil {
		t.Fatal(err)
	}
	s := startBilling(t, shortBusy, block("usage", "journal "+journal, "retry_interval 50ms"))
	const quota = 100_000_000
	key := s.gw.AddUser("nora", quota)
	if r := chat(t, s.gw, key, "gpt-4o-mini", false); r.status != 200 {
		t.Fatalf("before the fault: %d %s", r.status, r.body)
	}
	unlock := s.gw.LockDatabase(s.gw.DBPath)
	var refused reply
	served := 1
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("priced requests were never refused")
		}
		r := chat(t, s.gw, key, "gpt-4o-mini", false)
		if r.status == 200 {
			served++
			continue
		}
		refused = r
		break
	}
	if refused.status != http.StatusServiceUnavailable || refused.header.Get("Retry-After") == "" ||
		!strings.Contains(refused.body, `"error":{`) || !strings.Contains(refused.body, "billing is unavailable") {
		t.Fatalf("refusal: %d %v %s", refused.status, refused.header, refused.body)
	}
	if refused.header.Get("X-Should-Retry") == "false" {
		t.Fatal("a 503 for billing must be worth retrying")
	}
	upstreamBefore := len(s.up.Requests())
	if r := chat(t, s.gw, key, "gpt-4o-mini", false); r.status != 503 {
		t.Fatalf("a second priced request: %d", r.status)
	}
	if len(s.up.Requests()) != upstreamBefore {
		t.Fatal("a refused priced request reached the upstream")
	}
	if r := chat(t, s.gw, key, "free-model", false); r.status != 200 {
		t.Fatalf("a free model while billing is down: %d %s", r.status, r.body)
	}
	unlock()
	// billing comes back once the database takes the held rows
	eventually(t, "billing to come back", func() bool { return chat(t, s.gw, key, "gpt-4o-mini", false).status == 200 })
	served++
	var cost int64
	ok := 0
	eventually(t, "every served request's row", func() bool {
		cost, ok = 0, 0
		for _, r := range s.gw.WaitUsage("nora", served) {
			cost += r.Cost
			if r.Status == 200 && r.Model == "gpt-4o-mini" {
				ok++
			}
		}
		return ok >= served
	})
	if ok != served || cost != int64(served)*14 {
		t.Fatalf("%d priced rows costing %d; %d were served", ok, cost, served)
	}
	if _, used := s.gw.Quota("nora"); used != cost {
		t.Fatalf("used %d, rows cost %d", used, cost)
	}
}

// TestUsageQueueFullAnswers503: a queue of 2 rows, held by two streams in
// flight: a third request is answered 503 at once, not made to wait.
func TestUsageQueueFullAnswers503(t *testing.T) {
	s := startBilling(t, "{{DB}}", block("usage", "queue_size 2"))
	key := s.gw.AddUser("otto", 100_000_000)
	s.up.Set(func(b *gatewaytest.Behavior) {
		b.Reply = "one two three four five six"
		b.ChunkDelay = 50 * time.Millisecond
	})
	var streams []*http.Response
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %d: %v %v", i, err, resp)
		}
		streams = append(streams, resp)
	}
	r := chat(t, s.gw, key, "free-model", false)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "usage queue is full") {
		t.Fatalf("third request: %d %v %s", r.status, r.header, r.body)
	}
	for _, resp := range streams {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		resp.Body.Close()
	}
	eventually(t, "the queue to drain", func() bool { return chat(t, s.gw, key, "gpt-4o-mini", false).status == 200 })
	// the loop's own refusals (503, queue still full) are logged too, at no
	// cost: wait for the three served rows, not for any three
	var rows []gatewaytest.UsageRow
	var cost int64
	eventually(t, "the three served rows", func() bool {
		rows, cost = s.gw.WaitUsage("otto", 3), 0
		served := 0
		for _, r := range rows {
			cost += r.Cost
			if r.Status == 200 {
				served++
			}
		}
		return served >= 3
	})
	if _, used := s.gw.Quota("otto"); used != cost || cost != 3*14 {
		t.Fatalf("used %d, rows cost %d, want 42: %+v", used, cost, rows)
	}
}

// TestSIGKILLAfterLoad: N requests finished, SIGKILL a second later,
// restart: N rows and the exact balance.
func TestSIGKILLAfterLoad(t *testing.T) {
	s := startBilling(t, "{{DB}}", "")
	const quota = 100_000_000
	key := s.gw.AddUser("kurt", quota)
	l := startLoad(t, s.gw, key, "gpt-4o-mini", 8)
	l.waitSent(t, 300)
	counts := l.finish()
	time.Sleep(time.Second)
	s.gw.Kill()
	s.gw.Restart()
	checkBooks(t, s.gw, "kurt", quota, counts[200], counts[200])
}

// TestSIGKILLUnderLoad kills the gateway while requests are in flight,
// streamed and not, with a linger long enough that many rows wait in a
// batch at the moment of the kill: after a restart, every request whose
// answer the client read to its end has its row, and the balance is
// exactly what the rows charge (rows of answers cut by the kill may be
// there too: their upstream answered).
func TestSIGKILLUnderLoad(t *testing.T) {
	s := startBilling(t, "{{DB}}", block("usage", "linger 50ms"))
	const quota = 100_000_000
	key := s.gw.AddUser("kira", quota)
	var (
		mu       sync.Mutex
		complete = map[string]bool{}
		sent     atomic.Int64
		seq      atomic.Int64
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := seq.Add(1)
				id, stream := fmt.Sprintf("kill-%d", n), n%2 == 0
				body := fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":%v}`, stream)
				req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("X-Request-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the gateway is gone
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				// read to its end: a stream ends with [DONE] and a clean
				// close, a body with all its bytes
				if err == nil && resp.StatusCode == 200 && (!stream || strings.Contains(string(b), "data: [DONE]")) {
					mu.Lock()
					complete[id] = true
					mu.Unlock()
				}
				sent.Add(1)
			}
		}()
	}
	eventually(t, "requests to be answered", func() bool { return sent.Load() >= 200 })
	s.gw.Kill()
	close(stop)
	wg.Wait()
	s.gw.Restart()

	// a journal left by the kill is replayed before the gateway serves,
	// so every row there is to be is there now
	rows := s.gw.WaitUsage("kira", 0)
	byID := map[string]bool{}
	var cost int64
	for _, r := range rows {
		if byID[r.RequestID] {
			t.Errorf("request %s has two rows", r.RequestID)
		}
		byID[r.RequestID] = true
		cost += r.Cost
		if r.Status == 200 && r.Cost != 14 {
			t.Errorf("a 200 row cost %d, want 14: %+v", r.Cost, r)
		}
	}
	var lost []string
	for id := range complete {
		if !byID[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d answers read to their end have no usage row after kill -9: %v", len(lost), len(complete), lost)
	}
	u := s.gw.User("kira")
	if u.UsedQuota != cost || u.Quota != quota-cost || u.RequestCount != int64(len(rows)) {
		t.Fatalf("books: %d rows costing %d; user used %d, quota %d, %d requests", len(rows), cost, u.UsedQuota, u.Quota, u.RequestCount)
	}
}

// TestSIGTERMWithStreamsInFlight: streams running when the gateway is
// told to stop finish, and are billed, before it exits.
func TestSIGTERMWithStreamsInFlight(t *testing.T) {
	s := startBilling(t, "{{DB}}", "")
	const quota = 100_000_000
	key := s.gw.AddUser("tess", quota)
	reply := "slow words for a graceful stop"
	s.up.Set(func(b *gatewaytest.Behavior) { b.Reply = reply; b.ChunkDelay = 30 * time.Millisecond })
	const n = 5
	var wg sync.WaitGroup
	texts := make([]string, n)
	started := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			first := true
			var b strings.Builder
			for sc.Scan() {
				if first {
					started <- struct{}{}
					first = false
				}
				b.WriteString(sc.Text() + "\n")
			}
			texts[i] = b.String()
		}()
	}
	for i := 0; i < n; i++ {
		<-started
	}
	s.gw.Signal(syscall.SIGTERM)
	wg.Wait()
	s.gw.Wait()
	for i, txt := range texts {
		if !strings.Contains(txt, "data: [DONE]") {
			t.Fatalf("stream %d was cut by the shutdown:\n%s", i, txt)
		}
	}
	checkBooks(t, s.gw, "tess", quota, n, n)
}

// TestReloadChangesDatabaseUnderLoad: a reload to another database file
// while requests keep coming; the old database is drained before it
// closes, and each keeps exact books of what was served through it.
func TestReloadChangesDatabaseUnderLoad(t *testing.T) {
	s := startBilling(t, "{{DB}}", "")
	const quota = 100_000_000
	key := s.gw.AddUser("rhea", quota)
	// the second database starts as a copy, with the same user and key
	second := filepath.Join(s.gw.Dir, "second.db")
	db, err := sql.Open("sqlite3", s.gw.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`VACUUM INTO ?`, second); err != nil {
		t.Fatal(err)
	}
	db.Close()

	l := startLoad(t, s.gw, key, "gpt-4o-mini", 4)
	l.waitSent(t, 100)
	vars := gatewaytest.Vars{}
	for k, v := range s.vars {
		vars[k] = v
	}
	vars["DSN"] = second
	s.gw.Reload(s.cfg.String(), vars)
	l.waitSent(t, 100)
	counts := l.finish()
	// a keep-alive connection the old server closes under a request
	// resets it (status 0): such a request may or may not have been served;
	// one the old server read as its database was closing is refused (503,
	// to retry), not served: it has no row, which the count below checks
	served, lost := counts[200], counts[0]
	if int64(served+lost+counts[503]) != l.sent.Load() {
		t.Fatalf("answers %v", counts)
	}
	// every row is in one database or the other, and each charged its own
	st2 := gatewaytest.OpenStore(t, second)
	var u1, u2 *gatewaytest.User
	eventually(t, "both databases' rows", func() bool {
		u1 = s.gw.User("rhea")
		u2, _ = st2.UserByName(context.Background(), "rhea")
		return u2 != nil && u1.RequestCount+u2.RequestCount >= int64(served)
	})
	firstRows := len(s.gw.WaitUsage("rhea", 1))
	if n := u1.RequestCount + u2.RequestCount; n < int64(served) || n > int64(served+lost) || int64(firstRows) != u1.RequestCount {
		t.Fatalf("%d requests served (%d reset); first database has %d (%d rows), second %d", served, lost, u1.RequestCount, firstRows, u2.RequestCount)
	}
	if u1.UsedQuota != u1.RequestCount*14 || u1.Quota != quota-u1.UsedQuota || u2.UsedQuota != u2.RequestCount*14 || u2.Quota != quota-u2.UsedQuota {
		t.Fatalf("first %+v\nsecond %+v", u1, u2)
	}
	if u2.RequestCount == 0 {
		t.Fatal("nothing was served through the second database")
	}
}
