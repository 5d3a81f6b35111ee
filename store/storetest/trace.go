package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// testTraceIDs: a usage row keeps its request's trace id, and a task the
// trace of its submit, which every poll links to.
func testTraceIDs(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "tracy", 1_000_000)
	tok := mustToken(t, s, u.ID, "hash-tracy")
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	logs := []*store.UsageLog{
		{UserID: u.ID, TokenID: tok.ID, Model: "gpt-4o", Status: 200, TraceID: traceID},
		{UserID: u.ID, TokenID: tok.ID, Model: "gpt-4o", Status: 200}, // untraced
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListUsage = %d rows, %v", len(rows), err)
	}
	got := map[int64]string{rows[0].ID: rows[0].TraceID, rows[1].ID: rows[1].TraceID}
	if got[logs[0].ID] != traceID || got[logs[1].ID] != "" {
		t.Fatalf("trace ids = %v; want %q on row %d and none on row %d", got, traceID, logs[0].ID, logs[1].ID)
	}

	task := &store.Task{ID: "task_traced", UserID: u.ID, TokenID: tok.ID, Model: "sora-2", Reserved: 1}
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if tr, err := s.TaskTrace(ctx, task.ID); err != nil || tr != (store.TaskTrace{}) {
		t.Fatalf("untraced task's trace = %+v, %v; want none", tr, err)
	}
	want := store.TaskTrace{TraceID: traceID, SpanID: "00f067aa0ba902b7"}
	if err := s.SetTaskTrace(ctx, task.ID, want); err != nil {
		t.Fatal(err)
	}
	if tr, err := s.TaskTrace(ctx, task.ID); err != nil || tr != want {
		t.Fatalf("task trace = %+v, %v; want %+v", tr, err, want)
	}
	if err := s.SetTaskTrace(ctx, "no_such_task", want); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetTaskTrace on no task = %v; want ErrNotFound", err)
	}
	if _, err := s.TaskTrace(ctx, "no_such_task"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TaskTrace of no task = %v; want ErrNotFound", err)
	}
}
