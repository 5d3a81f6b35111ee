package sqlite_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func TestTaskLifecycle(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	task := &store.Task{ID: "task_1", UserID: 7, TokenID: 8, Channel: "kling", Model: "kling-v2", Reserved: 400_000}
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if task.Status != "pending" || task.CreatedAt.IsZero() || !task.UpdatedAt.Equal(task.CreatedAt) {
		t.Fatalf("defaults: %+v", *task)
	}
	got, err := s.TaskByID(ctx, "task_1")
	if err != nil {
		t.Fatal(err)
	}
	if *got != *task {
		t.Fatalf("got  %+v\nwant %+v", *got, *task)
	}

	if err := s.CreateTask(ctx, &store.Task{ID: "task_1"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := s.CreateTask(ctx, &store.Task{}); err == nil {
		t.Fatal("empty id accepted")
	}

	// An update from a partly filled Task changes only what UpdateTask owns.
	later := task.CreatedAt.Add(time.Minute)
	upd := &store.Task{ID: "task_1", Status: "succeeded", UpstreamID: "up-9", Result: `{"url":"https://x"}`, UpdatedAt: later}
	if err := s.UpdateTask(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want := *task
	want.Status, want.UpstreamID, want.Result, want.UpdatedAt = upd.Status, upd.UpstreamID, upd.Result, later
	if got, err = s.TaskByID(ctx, "task_1"); err != nil || *got != want {
		t.Fatalf("after update got %+v, %v\nwant %+v", got, err, want)
	}

	if err := s.UpdateTask(ctx, &store.Task{ID: "nope", Status: "failed"}); !isNotFound(err) {
		t.Fatalf("update missing: %v", err)
	}
	if _, err := s.TaskByID(ctx, "nope"); !isNotFound(err) {
		t.Fatalf("get missing: %v", err)
	}
}

func TestPendingTasks(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tasks := []struct {
		id, status string
		updated    int // minutes after base
	}{
		{"queued-late", "queued", 30},
		{"done", "succeeded", 1},
		{"running-early", "running", 5},
		{"broken", "failed", 2},
		{"pending-mid", "pending", 10},
	}
	for _, tt := range tasks {
		at := base.Add(time.Duration(tt.updated) * time.Minute)
		if err := s.CreateTask(ctx, &store.Task{ID: tt.id, Status: tt.status, CreatedAt: base, UpdatedAt: at}); err != nil {
			t.Fatal(err)
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

	// Finishing a task takes it off the list.
	if err := s.UpdateTask(ctx, &store.Task{ID: "running-early", Status: "failed"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingTasks(ctx, 10)
	if err != nil || len(got) != 2 || got[0].ID != "pending-mid" {
		t.Fatalf("after finishing one: %v, %v", got, err)
	}
}
