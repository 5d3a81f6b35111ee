package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// inflightConfig serves sora-2 on one OpenAI channel whose timeout
// bounds a submit, with short leases: a task whose submit never answered
// is taken up timeout + 5.5s after it was submitted. {{JOURNAL}} differs
// per instance.
func inflightConfig(timeout string) *caddyfile {
	return gatewayConfig().
		option(block("usage", "journal {{JOURNAL}}")).
		option(inflightTasks("24h")).
		channel("openai", "openai", "{{OPENAI}}", "sk-up-openai", "sora-2", "timeout "+timeout).
		price("sora-2", "video_second 0.10", "max_seconds 12").
		withSite(block("route /api/generate/*", "gateway_auth", "gateway_tasks"))
}

// inflightTasks is the tasks option of inflightConfig, keeping tasks
// for maxAge.
func inflightTasks(maxAge string) string {
	return block("tasks",
		"max_age "+maxAge,
		"poll_interval 50ms",
		"max_poll_interval 200ms",
		"poll_timeout 500ms",
		"lease 1s")
}

type inflightSetup struct {
	gw     *gatewaytest.Gateway
	openai *gatewaytest.FakeOpenAI
	vars   gatewaytest.Vars
	cfg    *caddyfile
	key    string
	hold   chan struct{} // closing it lets the vendor accept the held submit
}

// startInflight starts a gateway whose vendor holds every submit until
// the test lets it go, and submits one 4-second sora-2 task (400000 units)
// for ada; it returns once the vendor holds the submit.
func startInflight(t *testing.T, timeout string) (*inflightSetup, <-chan submitResult) {
	t.Helper()
	s := &inflightSetup{openai: gatewaytest.NewFakeOpenAI(t, "sk-up-openai"), hold: make(chan struct{})}
	dir := t.TempDir()
	s.vars = gatewaytest.Vars{"OPENAI": s.openai.URL, "DB": filepath.Join(dir, "gateway.db"), "JOURNAL": filepath.Join(dir, "journal-1")}
	s.cfg = inflightConfig(timeout)
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	s.gw.DBPath = s.vars["DB"]
	s.key = s.gw.AddUser("ada", 5_000_000)
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{HoldSubmits: s.hold})
	res := submitAsync(s.gw.URL, s.key, `{"model":"sora-2","prompt":"a slow vendor","duration":4}`)
	eventually(t, "the vendor to hold the submit", func() bool { return s.openai.Videos.Held() == 1 })
	return s, res
}

type submitResult struct {
	status int
	body   []byte
	err    error
}

// submitAsync submits a task from another goroutine; the answer comes on
// the channel.
func submitAsync(base, key, body string) <-chan submitResult {
	out := make(chan submitResult, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/generate/submit", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- submitResult{err: err}
			return
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = io.Copy(&b, resp.Body)
		out <- submitResult{status: resp.StatusCode, body: b.Bytes(), err: err}
	}()
	return out
}

// accepted checks that the held submit was answered 200 with a task id
// and that the task's stored upstream id is the vendor's job.
func (s *inflightSetup) accepted(t *testing.T, res <-chan submitResult) (taskID, jobID string) {
	t.Helper()
	r := <-res
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the held submit: %d %s %v", r.status, r.body, r.err)
	}
	var a taskAnswer
	if err := json.Unmarshal(r.body, &a); err != nil || a.Data.TaskID == "" {
		t.Fatalf("the held submit's answer: %s", r.body)
	}
	job := s.openai.Videos.Last(t) // fails the test when the vendor holds no job
	st := gatewaytest.OpenStore(t, s.vars["DB"])
	task, err := st.TaskByID(context.Background(), a.Data.TaskID)
	if err != nil || task.UpstreamID != job.ID {
		t.Fatalf("the task after its submit answered: %+v %v, want upstream id %s", task, err, job.ID)
	}
	return a.Data.TaskID, job.ID
}

// chargedOnce checks that ada paid exactly the task's 400000 units, once.
func chargedOnce(t *testing.T, gw *gatewaytest.Gateway) {
	t.Helper()
	rows := gw.WaitUsage("ada", 1)
	if q, used := gw.Quota("ada"); len(rows) != 1 || rows[0].Cost != 400_000 || q != 4_600_000 || used != 400_000 {
		t.Fatalf("quota %d used %d rows %+v: want 400000 charged once", q, used, rows)
	}
}

// TestTaskSubmitInFlightAcrossReload: a reload while the vendor is still
// taking a submit does not let the new configuration's poller fail and
// refund the task; the old configuration records the vendor's answer, and
// the task is polled to its end and charged.
func TestTaskSubmitInFlightAcrossReload(t *testing.T) {
	s, res := startInflight(t, "30s")
	// an unchanged config would not be reloaded
	s.gw.Reload(s.cfg.option(inflightTasks("23h")).String(), s.vars)
	// the new configuration's poller sweeps every 50ms meanwhile
	time.Sleep(time.Second)
	close(s.hold)
	taskID, jobID := s.accepted(t, res)
	if st := taskStatus(t, s.gw, s.key, taskID); st.Data.Status != "not_started" {
		t.Fatalf("the task once the vendor accepted it: %+v", st.Data)
	}
	s.openai.Videos.Finish(jobID)
	waitTask(t, s.gw, s.key, taskID, "finished")
	chargedOnce(t, s.gw)
}

// TestTaskSubmitInFlightAcrossRestart: a gateway told to stop (SIGTERM)
// while the vendor takes a submit finishes that submit before it exits,
// and the next instance, already running on the database (a rolling
// restart), neither fails the task meanwhile nor settles it twice.
func TestTaskSubmitInFlightAcrossRestart(t *testing.T) {
	s, res := startInflight(t, "30s")
	s.gw.Signal(syscall.SIGTERM)
	vars := gatewaytest.Vars{}
	for k, v := range s.vars {
		vars[k] = v
	}
	vars["JOURNAL"] = filepath.Join(filepath.Dir(s.vars["DB"]), "journal-2")
	next := gatewaytest.Start(t, s.cfg.String(), vars)
	next.DBPath = s.vars["DB"]
	time.Sleep(time.Second) // the next instance's poller sweeps meanwhile
	close(s.hold)
	taskID, jobID := s.accepted(t, res)
	s.gw.Wait()
	s.openai.Videos.Finish(jobID)
	waitTask(t, next, s.key, taskID, "finished")
	chargedOnce(t, next)
}

// TestTaskSubmitOutcomeUnknown: a gateway killed while the vendor takes a
// submit cannot know whether the vendor accepted it. Once the submit's
// lease runs out (the channel's timeout and the lease), the next instance
// settles the task as failed and charged its reservation, never refunded
// on a guess, saying why.
func TestTaskSubmitOutcomeUnknown(t *testing.T) {
	// the channel's timeout need only outlast the moment to the kill
	s, res := startInflight(t, "2s")
	s.gw.Kill()
	if r := <-res; r.err == nil {
		t.Fatalf("the killed gateway answered the submit: %d %s", r.status, r.body)
	}
	close(s.hold)
	st := gatewaytest.OpenStore(t, s.vars["DB"])
	pending, err := st.PendingTasks(context.Background(), 10)
	if err != nil || len(pending) != 1 || pending[0].UpstreamID != "" {
		t.Fatalf("tasks after the kill: %+v %v", pending, err)
	}
	taskID := pending[0].ID
	s.gw.Restart()
	failed := waitTask(t, s.gw, s.key, taskID, "failed")
	if msg := failed.Data.ErrorMessage; !strings.Contains(msg, "not known") || !strings.Contains(msg, "not refunded") {
		t.Fatalf("the unknown outcome's message: %q", msg)
	}
	chargedOnce(t, s.gw)
	if logs := waitLog(t, s.gw.Logs, "never answered"); !strings.Contains(logs, fmt.Sprintf(`"task_id":"%s"`, taskID)) {
		t.Fatalf("the operator is not told which task to check:\n%s", logs)
	}
}
