package history

import "golang.org/x/sys/unix"

// Now reads CLOCK_MONOTONIC in nanoseconds. Every process on one host reads
// the same clock, so times taken by different processes are comparable. Go's
// own monotonic reading is relative to each process's start and is not.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
