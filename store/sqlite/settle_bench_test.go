package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSettleBatchOneUser is the usage writer's cost per row as
// make bench's load makes it: one user, key, model and channel, every row
// with its own request ids, in batches of 4 (a light load) and of 100 (the
// linger's batch at about 2,000 requests a second). CPU is the process's,
// noisy on a shared machine; compare builds run by turns. Not part of
// `make test`:
//
//	go test -run '^$' -bench SettleBatchOneUser -benchtime 2000x ./store/sqlite
func BenchmarkSettleBatchOneUser(b *testing.B) {
	for _, batch := range []int{4, 100} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			ctx := context.Background()
			st, err := Open(filepath.Join(b.TempDir(), "c.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			u := &store.User{Username: "bench", Quota: 1 << 50}
			if err := st.CreateUser(ctx, u); err != nil {
				b.Fatal(err)
			}
			n := 0
			mk := func() []*store.UsageLog {
				rows := make([]*store.UsageLog, batch)
				for i := range rows {
					n++
					rows[i] = &store.UsageLog{CreatedAt: time.Now(), UserID: u.ID, TokenID: 1, Model: "gpt-4o-mini", Channel: "mock", Endpoint: "/v1/chat/completions",
						PromptTokens: 9, CompletionTokens: 231, Cost: 147, Status: 200, LatencyMS: 1, TTFBMS: 1,
						RequestID: fmt.Sprintf("%032x", n), UpstreamRequestID: fmt.Sprintf("chatcmpl-%d", n), Key: fmt.Sprintf("abcdef012345-%013d", n)}
				}
				return rows
			}
			for range 20 {
				st.SettleBatch(ctx, mk())
			}
			batches := make([][]*store.UsageLog, b.N)
			for i := range batches {
				batches[i] = mk()
			}
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				if err := st.SettleBatch(ctx, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N*batch)/1000, "cpu-µs/row")
		})
	}
}
