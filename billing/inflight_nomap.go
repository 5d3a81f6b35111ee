//go:build !linux

package billing

import (
	"errors"
	"os"
)

// mapSegment is Linux's only (fallocate reserves the blocks a mapping
// needs); elsewhere segments are written with write(2).
func mapSegment(*os.File, int) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

func unmapSegment([]byte) {}
