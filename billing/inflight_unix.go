//go:build unix

package billing

import (
	"os"
	"syscall"
)

// lockSegment marks a segment as its writer's for as long as the process
// lives (the lock dies with it), so another gateway starting on the same
// database leaves a live writer's segments alone.
func lockSegment(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// segmentInUse reports whether a live process holds the segment at path.
func segmentInUse(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
