package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// A task outlives the gateway that took it: a restart, a SIGKILL, and two
// instances on one database, each task settled once.

// second starts another gateway on the same database, with its own
// journal, as a second instance of a deployment.
func (s *taskSetup) second(t *testing.T) *gatewaytest.Gateway {
	t.Helper()
	vars := gatewaytest.Vars{}
	for k, v := range s.vars {
		vars[k] = v
	}
	vars["JOURNAL"] = filepath.Join(filepath.Dir(s.vars["DB"]), "journal-2")
	gw := gatewaytest.Start(t, s.cfg.String(), vars)
	gw.DBPath = s.vars["DB"]
	return gw
}

func TestTaskSurvivesRestart(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"a slow sunrise","duration":4}`)
	job := s.openai.Videos.Last(t)
	s.openai.Videos.Progress(job.ID, 10)
	waitTask(t, s.gw, key, sub.Data.TaskID, "running")

	// the gateway goes down; the job finishes meanwhile
	s.gw.Stop()
	s.openai.Videos.Finish(job.ID)
	s.gw.Restart()
	waitTask(t, s.gw, key, sub.Data.TaskID, "finished")

	// a task in flight across a reload is taken up by the new
	// configuration (the old one handed its leases back)
	sub2 := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"across a reload","duration":8}`)
	job2 := s.openai.Videos.Last(t)
	s.gw.Reload(s.cfg.String(), s.vars)
	s.openai.Videos.Finish(job2.ID)
	waitTask(t, s.gw, key, sub2.Data.TaskID, "finished")

	time.Sleep(300 * time.Millisecond) // several poll intervals: no second settlement
	rows := s.gw.WaitUsage("ada", 2)
	if len(rows) != 2 || rows[0].Cost != 400_000 || rows[1].Cost != 800_000 {
		t.Fatalf("usage after a restart and a reload: %+v", rows)
	}
	if q, used := s.gw.Quota("ada"); q != 3_800_000 || used != 1_200_000 {
		t.Fatalf("quota %d used %d, want 3800000 and 1200000", q, used)
	}
}

// TestTaskSurvivesKill: a gateway killed while it polls a task holds the
// task's lease; once the lease runs out (7s here: the least a lease may
// be, poll_timeout and five seconds) the next instance takes the task up,
// and it is settled once.
func TestTaskSurvivesKill(t *testing.T) {
	s := startTasksWith(t, taskOptions{maxAge: "24h", lease: "1s"})
	key := s.gw.AddUser("ada", 5_000_000)
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"x","duration":4}`)
	job := s.openai.Videos.Last(t)
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{HangPolls: true})
	time.Sleep(300 * time.Millisecond) // a poll hangs, its lease held
	s.gw.Kill()
	st := gatewaytest.OpenStore(t, s.vars["DB"])
	if task, err := st.TaskByID(context.Background(), sub.Data.TaskID); err != nil || task.LeaseOwner == "" {
		t.Fatalf("the killed gateway held no lease: %+v %v", task, err)
	}
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{})
	s.openai.Videos.Finish(job.ID)
	s.gw.Restart()
	waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	rows := s.gw.WaitUsage("ada", 1)
	if q, used := s.gw.Quota("ada"); len(rows) != 1 || q != 4_600_000 || used != 400_000 {
		t.Fatalf("after a kill: quota %d used %d rows %+v", q, used, rows)
	}
}

// TestTaskTwoInstancesSettleOnce runs two gateways on one database: both
// poll, both answer status calls that refresh from the vendor, and every
// task is settled, or refunded, exactly once.
func TestTaskTwoInstancesSettleOnce(t *testing.T) {
	s := startTasks(t, "24h")
	gw2 := s.second(t)
	key := s.gw.AddUser("ada", 20_000_000)
	gws := []*gatewaytest.Gateway{s.gw, gw2}

	const n = 8
	ids := make([]string, n)
	for i := range n {
		ids[i] = submitTask(t, gws[i%2], key, fmt.Sprintf(`{"model":"sora-2","prompt":"clip %d","duration":4}`, i)).Data.TaskID
	}
	jobs := s.openai.Videos.Jobs()
	if len(jobs) != n {
		t.Fatalf("%d jobs reached OpenAI, want %d", len(jobs), n)
	}
	// clients hammer both instances' status endpoints meanwhile
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, gw := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, id := range ids {
					resp, _ := gw.Do(http.MethodGet, "/api/generate/status/"+id, key, nil, nil)
					if resp.StatusCode != 200 {
						t.Errorf("status answered %d", resp.StatusCode)
					}
				}
			}
		}()
	}
	for i, j := range jobs {
		if i%2 == 0 {
			s.openai.Videos.Finish(j.ID)
		} else {
			s.openai.Videos.Fail(j.ID, "generation failed")
		}
	}
	for i, id := range ids {
		want := map[bool]string{true: "finished", false: "failed"}[i%2 == 0]
		waitTask(t, gws[(i+1)%2], key, id, want)
	}
	time.Sleep(300 * time.Millisecond) // more polls and status calls: still once
	close(stop)
	wg.Wait()

	rows := s.gw.WaitUsage("ada", n)
	if len(rows) != n {
		t.Fatalf("%d usage rows for %d tasks", len(rows), n)
	}
	var charged int64
	for _, r := range rows {
		charged += r.Cost
	}
	if q, used := s.gw.Quota("ada"); charged != 4*400_000 || used != charged || q != 20_000_000-charged {
		t.Fatalf("charged %d, quota %d used %d: want 4 tasks of 400000 charged once each", charged, q, used)
	}
	u := s.gw.User("ada")
	if u.RequestCount != n {
		t.Fatalf("request count %d, want %d", u.RequestCount, n)
	}
	st := gatewaytest.OpenStore(t, s.vars["DB"])
	for _, id := range ids {
		task, err := st.TaskByID(context.Background(), id)
		if err != nil || task.FinishedAt.IsZero() || task.LeaseOwner != "" {
			t.Fatalf("task %s after the end: %+v %v", id, task, err)
		}
	}
}
