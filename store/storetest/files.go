package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Files: stored once per id, listed newest first per user (by purpose,
// after a cursor), deleted only by their owner, found by expiry; a user's
// batches (tasks with a prefix) listed the same way; a batch settled once
// with a row per line, each charging its own cost, the rest of the
// reservation given back.
func testFiles(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	ada := mustUser(t, s, "files-ada", 1_000_000)
	bob := mustUser(t, s, "files-bob", 0)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 4 {
		purpose := "batch"
		if i == 2 {
			purpose = "assistants"
		}
		f := &store.File{ID: fmt.Sprintf("file-%d", i), UserID: ada.ID, Purpose: purpose, Filename: "in.jsonl",
			Bytes: int64(100 + i), Lines: int64(i), CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		if i == 0 {
			f.ExpiresAt = base.Add(time.Minute)
		}
		if err := s.CreateFile(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateFile(ctx, &store.File{ID: "file-0", UserID: bob.ID}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an id stored twice: %v, want ErrConflict", err)
	}
	if err := s.CreateFile(ctx, &store.File{ID: "bob-1", UserID: bob.ID, Purpose: "batch", CreatedAt: base}); err != nil {
		t.Fatal(err)
	}
	got, err := s.FileByID(ctx, "file-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != ada.ID || got.Bytes != 101 || got.Lines != 1 || got.Purpose != "batch" || !got.CreatedAt.Equal(base.Add(time.Minute)) || !got.ExpiresAt.IsZero() {
		t.Fatalf("file-1: %+v", *got)
	}
	if _, err := s.FileByID(ctx, "nope"); !isNotFound(err) {
		t.Fatalf("missing file: %v", err)
	}
	ids := func(fs []*store.File) (out []string) {
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	all, err := s.ListFiles(ctx, ada.ID, "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(all)) != "[file-3 file-2 file-1 file-0]" {
		t.Fatalf("ada's files: %v", ids(all))
	}
	page, _ := s.ListFiles(ctx, ada.ID, "batch", "file-3", 1)
	if fmt.Sprint(ids(page)) != "[file-1]" {
		t.Fatalf("after file-3, purpose batch, limit 1: %v", ids(page))
	}
	if n, err := s.UserFileBytes(ctx, ada.ID); err != nil || n != 100+101+102+103 {
		t.Fatalf("ada's bytes: %d %v", n, err)
	}
	if n, err := s.UserFileBytes(ctx, 999_999); err != nil || n != 0 {
		t.Fatalf("no one's bytes: %d %v", n, err)
	}
	if err := s.DeleteFile(ctx, bob.ID, "file-1"); !isNotFound(err) {
		t.Fatalf("bob deleting ada's file: %v, want ErrNotFound", err)
	}
	if err := s.DeleteFile(ctx, ada.ID, "file-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FileByID(ctx, "file-1"); !isNotFound(err) {
		t.Fatalf("deleted file: %v", err)
	}
	exp, err := s.ExpiredFiles(ctx, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(exp)) != "[file-0]" {
		t.Fatalf("expired: %v", ids(exp))
	}

	// a batch: reserved at creation, settled once with a row per line
	tok := mustToken(t, s, ada.ID, "files-ada-key")
	for i, id := range []string{"batch_a", "task_b", "batch_c"} {
		if err := s.CreateTask(ctx, &store.Task{ID: id, UserID: ada.ID, TokenID: tok.ID, Model: "gpt-4o-mini",
			Reserved: 100_000, CreatedAt: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	batches, err := s.UserTasks(ctx, ada.ID, "batch_", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || batches[0].ID != "batch_c" || batches[1].ID != "batch_a" {
		t.Fatalf("ada's batches: %+v", batches)
	}
	if after, _ := s.UserTasks(ctx, ada.ID, "batch_", "batch_c", 10); len(after) != 1 || after[0].ID != "batch_a" {
		t.Fatalf("after batch_c: %+v", after)
	}
	if none, _ := s.UserTasks(ctx, bob.ID, "batch_", "", 10); len(none) != 0 {
		t.Fatalf("bob sees %d batches", len(none))
	}
	if got := mustGetUser(t, s, ada.ID); got.Quota != 700_000 {
		t.Fatalf("after three reservations: quota %d", got.Quota)
	}
	task := &store.Task{ID: "batch_a", Status: "finished", Progress: 100}
	rows := []*store.UsageLog{
		{Key: "batch:batch_a:0", Model: "gpt-4o-mini", Endpoint: "/v1/batches", Status: 200, PromptTokens: 10, Cost: 1_234},
		{Key: "batch:batch_a:1", Model: "gpt-4o-mini", Endpoint: "/v1/batches", Status: 200, PromptTokens: 20, Cost: 4_321},
		{Key: "batch:batch_a:2", Model: "gpt-4o-mini", Endpoint: "/v1/batches", Status: 500, Error: "failed line"},
	}
	settled, err := s.FinishTaskRows(ctx, task, rows)
	if err != nil || !settled {
		t.Fatalf("settle: %v %v", settled, err)
	}
	if task.Cost != 5_555 {
		t.Fatalf("batch cost %d, want the rows' sum 5555", task.Cost)
	}
	if got := mustGetUser(t, s, ada.ID); got.Quota != 700_000+100_000-5_555 {
		t.Fatalf("after settling: quota %d, want %d", got.Quota, 700_000+100_000-5_555)
	}
	again := &store.Task{ID: "batch_a", Status: "finished"}
	if settled, err := s.FinishTaskRows(ctx, again, []*store.UsageLog{{Key: "batch:batch_a:0", Cost: 1_234}}); err != nil || settled {
		t.Fatalf("settled twice: %v %v", settled, err)
	}
	if got := mustGetUser(t, s, ada.ID); got.Quota != 700_000+100_000-5_555 {
		t.Fatalf("a second settle moved money: quota %d", got.Quota)
	}
	logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: ada.ID})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var sum int64
	for _, l := range logs {
		if l.Endpoint == "/v1/batches" {
			n++
			sum += l.Cost
			if l.TokenID != tok.ID {
				t.Fatalf("row without the batch's token: %+v", *l)
			}
		}
	}
	if n != 3 || sum != 5_555 {
		t.Fatalf("usage rows: %d summing %d, want 3 summing 5555", n, sum)
	}
}
