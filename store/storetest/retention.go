package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testRetentionKeepsDailyTotals(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "alice", 1_000_000)
	day := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	var logs []*store.UsageLog
	for i := range 25 {
		logs = append(logs, &store.UsageLog{UserID: u.ID, Model: "m", Cost: 3, PromptTokens: 10, CompletionTokens: 2,
			CreatedAt: day.Add(time.Duration(i) * time.Hour), RequestID: "req", UpstreamRequestID: "up"})
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	cutoff := day.Add(20 * time.Hour) // rows 0..19 are older
	var deleted, batches int64
	for {
		n, err := s.DeleteUsageBefore(ctx, cutoff, 7)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if n > 7 {
			t.Fatalf("a batch deleted %d rows, more than its 7", n)
		}
		deleted += n
		batches++
	}
	if deleted != 20 || batches != 3 {
		t.Fatalf("deleted %d rows in %d batches, want 20 in 3", deleted, batches)
	}
	left, err := s.UsageSince(ctx, time.Time{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 5 || !left[0].CreatedAt.Equal(cutoff) || left[0].RequestID != "req" || left[0].UpstreamRequestID != "up" {
		t.Fatalf("left %d rows, first %+v; want the 5 from the cutoff on with their ids", len(left), left[0])
	}
	days, err := s.DailyUsageByModel(ctx, u.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// 24 rows on the 4th, one on the 5th; none of it lost with the rows
	if len(days) != 2 || !days[0].Day.Equal(day) || days[0].Requests != 24 || days[0].Cost != 72 ||
		days[0].PromptTokens != 240 || days[1].Requests != 1 || days[1].CompletionTokens != 2 {
		t.Fatalf("days = %+v %+v", days[0], days[len(days)-1])
	}
	// pages in id order, from since on
	page, err := s.UsageSince(ctx, cutoff.Add(time.Hour), left[1].ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].ID != left[2].ID || page[1].ID != left[3].ID {
		t.Fatalf("page = %+v", page)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
