package billing

import (
	"os"
	"syscall"
)

// mapSegment allocates size bytes of blocks for f and maps them shared
// for writing. The blocks are allocated first because a store to a
// mapped page the file system cannot back (a full disk) kills the process
// with SIGBUS, where a write(2) would only fail.
func mapSegment(f *os.File, size int) ([]byte, error) {
	fd := int(f.Fd())
	if err := syscall.Fallocate(fd, 0, 0, int64(size)); err != nil {
		_ = f.Truncate(0) // a failed call may leave some of the blocks
		return nil, err
	}
	m, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		_ = f.Truncate(0)
		return nil, err
	}
	return m, nil
}

func unmapSegment(m []byte) { _ = syscall.Munmap(m) }
