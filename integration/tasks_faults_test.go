package integration

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Vendors that refuse a task, fail or hang at submit or on polls, or never
// finish: the task is failed or retried and the reservation is given back
// or charged once.

func TestTaskUpstreamRejection(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	tests := []struct {
		name, body, want string
	}{
		// metadata reaches the vendor's request as it is: OpenAI refuses
		// an option it does not have, with its own words
		{"unknown vendor option", `{"model":"sora-2","prompt":"x","metadata":{"style":"noir"}}`, "Unknown parameter: 'style'."},
		{"moderation", `{"model":"sora-2","prompt":"something forbidden"}`, "blocked by our moderation system"},
		{"Veo's duration", `{"model":"veo-3.0-generate-001","prompt":"x","duration":5}`, "supported durations are 4, 6 and 8"},
		{"Veo's unknown parameter", `{"model":"veo-3.0-generate-001","input":{"prompt":"x","metadata":{"fps":60}}}`, `Unknown name "fps"`},
		{"Veo's Vertex-only option", `{"model":"veo-3.0-generate-001","input":{"prompt":"x","metadata":{"generateAudio":true}}}`, `Unknown name "generateAudio"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(tt.body), nil)
			a := decodeTask(t, resp.StatusCode, b)
			if resp.StatusCode != 400 || a.Error == nil || !strings.Contains(a.Error.Message, tt.want) {
				t.Fatalf("got %d %s, want the vendor's %q", resp.StatusCode, b, tt.want)
			}
		})
	}
	rows := s.gw.WaitUsage("ada", len(tests))
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("rejected submits cost: quota %d used %d, rows %+v", q, used, rows)
	}
}

// TestTaskSubmitFaults: a vendor that fails or hangs at submit gets the
// client a 5xx in the task shape, and the reservation back.
func TestTaskSubmitFaults(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	for _, tc := range []struct {
		f      gatewaytest.JobFaults
		status int
	}{{gatewaytest.JobFaults{SubmitStatus: 503}, 502}, {gatewaytest.JobFaults{HangSubmits: true}, 504}} {
		s.gemini.Videos.SetFaults(tc.f)
		resp, b := s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(`{"model":"veo-3.0-generate-001","prompt":"x"}`), nil)
		if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != tc.status || a.Error == nil {
			t.Fatalf("submit against %+v: %d %s", tc.f, resp.StatusCode, b)
		}
	}
	s.gw.WaitUsage("ada", 2)
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("failed submits cost: quota %d used %d", q, used)
	}

	// a failing channel fails over to the next; the task lives there
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{SubmitStatus: 500})
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"x","duration":4}`)
	if len(s.backup.Videos.Jobs()) == 0 || len(s.openai.Videos.Jobs()) != 0 {
		t.Fatalf("the backup channel got no job (primary has %d)", len(s.openai.Videos.Jobs()))
	}
	job := s.backup.Videos.Last(t)
	s.backup.Videos.Finish(job.ID)
	done := waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	resp, b := s.gw.Do(http.MethodGet, strings.TrimPrefix(done.Data.Files[0].URL, s.gw.URL), key, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(b, gatewaytest.VideoBytes(job.ID)) {
		t.Fatalf("the backup channel's file: %d %q", resp.StatusCode, b)
	}
	rows := s.gw.WaitUsage("ada", 3)
	if last := rows[len(rows)-1]; last.Channel != "openai-backup" || last.Cost != 400_000 {
		t.Fatalf("the failed-over task's row: %+v", last)
	}
}

// TestTaskPollFaults: a vendor that fails, hangs or answers too much on
// polls does not fail the task; it is polled again and settles once the
// vendor answers.
func TestTaskPollFaults(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"x","duration":4}`)
	job := s.openai.Videos.Last(t)
	s.openai.Videos.Finish(job.ID)
	for _, f := range []gatewaytest.JobFaults{{PollStatus: 500}, {HangPolls: true}, {HugePolls: 1 << 20}} {
		s.openai.Videos.SetFaults(f)
		time.Sleep(400 * time.Millisecond) // polls (and status refreshes) meet the fault
		if st := taskStatus(t, s.gw, key, sub.Data.TaskID); st.Data.Status != "not_started" {
			t.Fatalf("status while the vendor misbehaves (%+v): %+v", f, st.Data)
		}
	}
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{})
	waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	if q, _ := s.gw.Quota("ada"); q != 4_600_000 {
		t.Fatalf("quota after a task polled through faults: %d", q)
	}
}

func TestTaskMaxAge(t *testing.T) {
	s := startTasks(t, "1s")
	key := s.gw.AddUser("ada", 5_000_000)
	sub := submitTask(t, s.gw, key, `{"model":"veo-3.0-generate-001","prompt":"never ends","duration":4}`)
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-1_600_000 {
		t.Fatalf("quota after submit: %d", q)
	}
	failed := waitTask(t, s.gw, key, sub.Data.TaskID, "failed")
	if !strings.Contains(failed.Data.ErrorMessage, "did not finish within 1s") || !strings.Contains(failed.Data.ErrorMessage, "refunded") {
		t.Fatalf("expired task: %+v", failed.Data)
	}
	s.gw.WaitUsage("ada", 1)
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("an expired task cost: quota %d used %d", q, used)
	}
}
