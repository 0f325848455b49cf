// Package procstate reads the scheduling state of a process from /proc.
package procstate

import (
	"bytes"
	"fmt"
	"os"
	"time"
)

// WaitStopped polls /proc until every thread of pid is stopped (state T),
// or pid is gone. The kernel wakes one thread to start a group stop, and on
// a loaded machine the others can run on for a millisecond meanwhile, long
// enough for a "paused" process to send what the pause was meant to delay.
// An unreadable /proc (a container engine on another kernel) ends the wait.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := AllThreadsStopped(pid)
		if err != nil || stopped {
			return nil // gone (or unreadable): nothing left to wait for
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d did not stop within %s of SIGSTOP", pid, timeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// AllThreadsStopped reports whether every thread of pid is stopped (or
// exiting).
func AllThreadsStopped(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		// The state follows the command name, which may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			continue
		}
		if state := stat[i+2]; state != 'T' && state != 't' && state != 'Z' && state != 'X' {
			return false, nil
		}
	}
	return true, nil
}

// Runs reports whether the process pid that started at start (see
// StartTime) still runs: it exists, is the same process, and is not a
// zombie waiting for its parent to reap it.
func Runs(pid int, start string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	fields := bytes.Fields(stat[i+1:])
	return len(fields) >= 20 && string(fields[19]) == start && fields[0][0] != 'Z' && fields[0][0] != 'X'
}

// StartTime is the start time of pid in clock ticks since boot (field 22 of
// /proc/PID/stat): with the pid it names one process, even after the pid is
// reused.
func StartTime(pid int) (string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(stat[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return string(fields[19]), nil
}
