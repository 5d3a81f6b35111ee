package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

// countUsage counts the usage rows the gateway wrote, once every gateway
// process has stopped (it writes rows in batches and flushes on shutdown).
func (b *bench) countUsage() {
	u := &b.report.Usage
	n, err := countRows(b.s.db)
	if err == nil {
		u.UsageRows, u.CountedBy = n, "store CountUsage (usage_logs rows)"
		return
	}
	// fall back to what the gateway itself says about the user
	out, cerr := gatewayCLI(b.s, b.s.caddyfile, "user", "show", "--username", "bench")
	if cerr == nil {
		var v struct {
			RequestCount *int64 `json:"request_count"`
		}
		if json.Unmarshal([]byte(out), &v) == nil && v.RequestCount != nil {
			u.UsageRows, u.CountedBy = *v.RequestCount, "gateway user show: request_count"
			return
		}
		cerr = fmt.Errorf("no request_count in %q", out)
	}
	u.Error = fmt.Sprintf("counting usage rows: %v; and %v", err, cerr)
	u.UsageRows = -1
}

func countRows(path string) (int64, error) {
	st, err := store.Open("sqlite", path)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return st.CountUsage(context.Background())
}
