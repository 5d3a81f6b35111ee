package gatewaycmd

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/internal/spreadsheet"
	"github.com/caddy-model-gateway/gateway/store"
)

// exportPage is how many rows the export reads at a time: each read is a
// short query, so an export of millions of rows holds no long transaction.
const exportPage = 1000

func (e Env) usageExportCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "export [--since <time|duration>] [--format csv|jsonl]",
		Short: "Streams usage rows to stdout, oldest first, as CSV or JSON lines",
		Long: `Streams usage rows to stdout in id order, one page at a time, so any number
of rows can be exported while the gateway serves. --since takes a date
(2026-01-31), an RFC 3339 time, or a duration back from now (24h, 7d).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sinceFlag, _ := cmd.Flags().GetString("since")
			format, _ := cmd.Flags().GetString("format")
			since, err := e.parseSince(sinceFlag, time.Now())
			if err != nil {
				return err
			}
			if format != "csv" && format != "jsonl" {
				return fmt.Errorf("--format must be csv or jsonl, not %q", format)
			}
			st, err := e.OpenStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			if err := exportUsage(ctx, st, since, format, out); err != nil {
				return err
			}
			return out.Flush()
		},
	}
	c.Flags().String("since", "", "only rows created at or after this date, time or duration ago (default: all)")
	c.Flags().String("format", "jsonl", "csv or jsonl")
	return c
}

// parseSince reads --since: empty (everything), a date, an RFC 3339 time
// or a duration before now.
func (e Env) parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := e.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q is not a date (2026-01-31), an RFC 3339 time or a duration (7d)", s)
}

var usageCSVHeader = []string{"id", "created_at", "request_id", "upstream_request_id", "user_id", "token_id",
	"model", "channel", "endpoint", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
	"cost", "status", "estimated", "stream", "latency_ms", "ttfb_ms", "error", "windows", "plan", "price_tier"}

func exportUsage(ctx context.Context, st store.Store, since time.Time, format string, out *bufio.Writer) error {
	var cw *csv.Writer
	enc := json.NewEncoder(out)
	if format == "csv" {
		cw = csv.NewWriter(out)
		if err := cw.Write(usageCSVHeader); err != nil {
			return err
		}
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	var after int64
	for {
		rows, err := st.UsageSince(ctx, since, after, exportPage)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if cw == nil {
				if err := enc.Encode(r); err != nil {
					return err
				}
				continue
			}
			// text a client or an upstream chose goes through Cell, so a
			// spreadsheet shows it rather than runs it
			txt := spreadsheet.Cell
			if err := cw.Write([]string{i64(r.ID), r.CreatedAt.UTC().Format(time.RFC3339Nano), txt(r.RequestID), txt(r.UpstreamRequestID),
				i64(r.UserID), i64(r.TokenID), txt(r.Model), txt(r.Channel), txt(r.Endpoint), i64(r.PromptTokens), i64(r.CompletionTokens),
				i64(r.CachedTokens), i64(r.ReasoningTokens), i64(r.Cost), strconv.Itoa(r.Status),
				strconv.FormatBool(r.Estimated), strconv.FormatBool(r.Stream), i64(r.LatencyMS), i64(r.TTFBMS), txt(r.Error), txt(r.Windows), txt(r.Plan),
				i64(r.PriceTier)}); err != nil {
				return err
			}
		}
		if cw != nil {
			cw.Flush()
			if err := cw.Error(); err != nil {
				return err
			}
		}
		if len(rows) < exportPage {
			return nil
		}
		after = rows[len(rows)-1].ID
	}
}
