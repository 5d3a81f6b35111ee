package account

import (
	"context"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// SpendDay is what a user spent on one UTC day.
type SpendDay struct {
	Day      string `json:"day"` // 2006-01-02
	Cost     int64  `json:"cost"`
	Requests int64  `json:"requests"`
}

// DailySpend returns one entry per UTC day for the last days days, today
// included, oldest first, zero-filled: a chart needs every day.
func DailySpend(ctx context.Context, st store.Store, userID int64, days int) ([]SpendDay, error) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, 1-days)
	spent, err := st.DailySpend(ctx, userID, first)
	if err != nil {
		return nil, err
	}
	out := make([]SpendDay, days)
	for i := range out {
		out[i].Day = first.AddDate(0, 0, i).Format(time.DateOnly)
	}
	for _, s := range spent {
		if i := int(s.Day.Sub(first) / (24 * time.Hour)); i >= 0 && i < days {
			out[i].Cost, out[i].Requests = s.Cost, s.Requests
		}
	}
	return out, nil
}
