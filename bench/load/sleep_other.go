//go:build !linux

package load

import "time"

func sleepFor(d time.Duration) { time.Sleep(d) }
