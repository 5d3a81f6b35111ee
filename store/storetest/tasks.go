package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testTaskLifecycle(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "ada", 1_000_000)
	tok := mustToken(t, s, u.ID, "hash-ada")
	lease := time.Now().Add(time.Minute)
	task := &store.Task{ID: "task_1", UserID: u.ID, TokenID: tok.ID, Model: "sora-2", Reserved: 400_000,
		Duration: 8, PriceSecond: 50_000, RequestID: "req-1", LeaseOwner: "a", LeaseUntil: lease}
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if task.Status != "not_started" || task.CreatedAt.IsZero() || !task.UpdatedAt.Equal(task.CreatedAt) {
		t.Fatalf("defaults: %+v", *task)
	}
	// the reservation left the balance with the task
	if got := mustGetUser(t, s, u.ID); got.Quota != 600_000 || got.UsedQuota != 0 {
		t.Fatalf("after create: quota %d used %d", got.Quota, got.UsedQuota)
	}
	if got, _ := s.TokenByID(ctx, tok.ID); got.UsedQuota != 400_000 {
		t.Fatalf("token used after create: %d", got.UsedQuota)
	}
	got, err := s.TaskByID(ctx, "task_1")
	if err != nil {
		t.Fatal(err)
	}
	want := *task
	want.LeaseUntil = ms(lease)
	if *got != want {
		t.Fatalf("got  %+v\nwant %+v", *got, want)
	}
	if err := s.CreateTask(ctx, &store.Task{ID: "task_1"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 600_000 {
		t.Fatalf("a refused create moved money: quota %d", got.Quota)
	}
	if err := s.CreateTask(ctx, &store.Task{}); err == nil {
		t.Fatal("empty id accepted")
	}

	// only the lease holder saves, and saving releases the lease
	upd := &store.Task{ID: "task_1", Status: "running", Progress: 40, UpstreamID: "video_9", Channel: "openai", LeaseOwner: "b"}
	if err := s.UpdateTask(ctx, upd); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update by another owner: %v", err)
	}
	upd.LeaseOwner = "a"
	if err := s.UpdateTask(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.TaskByID(ctx, "task_1"); got.Progress != 40 || got.UpstreamID != "video_9" || got.LeaseOwner != "" || got.Reserved != 400_000 || got.UserID != u.ID {
		t.Fatalf("after update: %+v", *got)
	}
	if err := s.UpdateTask(ctx, &store.Task{ID: "nope", LeaseOwner: "a"}); !isNotFound(err) {
		t.Fatalf("update missing: %v", err)
	}

	// finishing settles once: the reservation comes back, the cost goes
	fin := *got
	fin.Status, fin.Progress, fin.Cost, fin.Files = "finished", 100, 250_000, `[{"file_url":"u","file_type":"video"}]`
	row := &store.UsageLog{Model: "sora-2", Endpoint: "/api/generate/submit", Status: 200}
	if ok, err := s.FinishTask(ctx, &fin, row); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	again := fin
	again.Status, again.Cost = "failed", 0
	if ok, err := s.FinishTask(ctx, &again, &store.UsageLog{}); err != nil || ok {
		t.Fatalf("second finish: %v %v", ok, err)
	}
	gu := mustGetUser(t, s, u.ID)
	if gu.Quota != 750_000 || gu.UsedQuota != 250_000 || gu.RequestCount != 1 {
		t.Fatalf("after finish: quota %d used %d requests %d", gu.Quota, gu.UsedQuota, gu.RequestCount)
	}
	if got, _ := s.TokenByID(ctx, tok.ID); got.UsedQuota != 250_000 {
		t.Fatalf("token used after finish: %d", got.UsedQuota)
	}
	logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(logs) != 1 || logs[0].Cost != 250_000 || logs[0].Key != "task:task_1" {
		t.Fatalf("usage rows: %+v %v", logs, err)
	}
	got, _ = s.TaskByID(ctx, "task_1")
	if got.Status != "finished" || got.FinishedAt.IsZero() || got.Cost != 250_000 {
		t.Fatalf("finished task: %+v", *got)
	}
	if _, err := s.LeaseTask(ctx, "task_1", "a", lease); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("leasing a finished task: %v", err)
	}
}

func testLeaseTasksNeverTwice(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	past := time.Now().Add(-time.Minute)
	for i := range 40 {
		if err := s.CreateTask(ctx, &store.Task{ID: fmt.Sprintf("t%02d", i), UserID: 1, NextPollAt: past}); err != nil {
			t.Fatal(err)
		}
	}
	// a task due later is not leased
	if err := s.CreateTask(ctx, &store.Task{ID: "later", UserID: 1, NextPollAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("owner", w)
			for {
				got, err := s.LeaseTasks(ctx, owner, until, 3)
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
					if task.LeaseOwner != owner {
						t.Errorf("returned lease owner %q, want %q", task.LeaseOwner, owner)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 40 || seen["later"] != "" {
		t.Fatalf("leased %d tasks (later: %q), want the 40 due", len(seen), seen["later"])
	}
	// a held task cannot be leased by another, and comes back once released
	if _, err := s.LeaseTask(ctx, "t00", "intruder", until); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("lease of a held task: %v", err)
	}
	if err := s.ReleaseTasks(ctx, seen["t00"]); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LeaseTask(ctx, "t00", "intruder", until); err != nil || got.LeaseOwner != "intruder" {
		t.Fatalf("lease after release: %+v %v", got, err)
	}
	if _, err := s.LeaseTask(ctx, "nope", "x", until); !isNotFound(err) {
		t.Fatalf("lease of a missing task: %v", err)
	}
}

func testFinishTaskExactlyOnceConcurrently(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "bo", 1_000_000)
	if err := s.CreateTask(ctx, &store.Task{ID: "task_x", UserID: u.ID, Reserved: 300_000}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := &store.Task{ID: "task_x", Status: "failed", Error: fmt.Sprint("attempt ", i)}
			ok, err := s.FinishTask(ctx, task, &store.UsageLog{Status: 502})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				settled++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if settled != 1 {
		t.Fatalf("settled %d times", settled)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 1_000_000 || got.UsedQuota != 0 || got.RequestCount != 1 {
		t.Fatalf("after a refund: quota %d used %d requests %d", got.Quota, got.UsedQuota, got.RequestCount)
	}
}

func testPendingTasks(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tasks := []struct {
		id      string
		updated int // minutes after base
		done    bool
	}{
		{"queued-late", 30, false},
		{"done", 1, true},
		{"running-early", 5, false},
		{"broken", 2, true},
		{"pending-mid", 10, false},
	}
	for _, tt := range tasks {
		at := base.Add(time.Duration(tt.updated) * time.Minute)
		if err := s.CreateTask(ctx, &store.Task{ID: tt.id, CreatedAt: base, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		if tt.done {
			if _, err := s.FinishTask(ctx, &store.Task{ID: tt.id, Status: "failed"}, &store.UsageLog{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		limit int
		want  []string
	}{
		{0, []string{"running-early", "pending-mid", "queued-late"}},
		{2, []string{"running-early", "pending-mid"}},
	}
	for _, tt := range tests {
		got, err := s.PendingTasks(ctx, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range got {
			ids = append(ids, task.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Fatalf("limit %d: got %v, want %v", tt.limit, ids, tt.want)
		}
	}
}
