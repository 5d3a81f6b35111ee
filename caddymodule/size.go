package caddymodule

import (
	"encoding/json"
	"fmt"

	"github.com/dustin/go-humanize"
)

// parseSize reads a byte size such as 32MB or 10MiB.
func parseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > 1<<40 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(n), nil
}

func caddyconfigUnmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}
