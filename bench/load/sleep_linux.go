package load

import (
	"syscall"
	"time"
)

// sleepFor sleeps on the calling thread with nanosleep: within about 0.1 ms
// of d on the bench's machine, where time.Sleep wakes up to 1 ms late when
// the process is otherwise idle (the runtime's poller waits in whole
// milliseconds).
func sleepFor(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
