package store

import (
	"context"
	"time"
)

// UsageDays is a store that keeps usage rows apart by UTC day (PostgreSQL's
// day partitions), so that retention can remove a whole day at once
// instead of a batch of rows at a time. Retention asks it first and leaves
// the rest (a partly expired day, rows kept apart from any day) to
// DeleteUsageBefore.
type UsageDays interface {
	// DropUsageDays removes every day of usage rows that ends at or
	// before cutoff and says how many rows went. Their days stay in
	// DailySpend and DailyUsageByModel.
	DropUsageDays(ctx context.Context, cutoff time.Time) (int64, error)
}
