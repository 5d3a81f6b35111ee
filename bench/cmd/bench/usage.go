package main

import (
	"database/sql"
	"encoding/json"
	"fmt"

	_ "github.com/mattn/go-sqlite3"
)

// countUsage counts the usage rows the gateway wrote, once every gateway
// process has stopped (it writes rows in batches and flushes on shutdown).
func (b *bench) countUsage() {
	u := &b.report.Usage
	n, err := countRows(b.s.db)
	if err == nil {
		u.UsageRows, u.CountedBy = n, "SELECT COUNT(*) FROM usage_logs"
		return
	}
	// fall back to what the gateway itself says about the user
	out, cerr := gatewayCLI(b.s, "user", "show", "--username", "bench")
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
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRow("SELECT COUNT(*) FROM usage_logs").Scan(&n)
	return n, err
}
