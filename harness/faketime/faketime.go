// Package faketime moves the wall clock of one server alone: the server is
// started under libfaketime, which reads an offset from a file on every
// clock call, and a fault rewrites the file. Local processes and containers
// (whose node directory is mounted at the same path) share this file.
package faketime

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The libraries a faked clock needs, at Debian's paths (in lockcheck's
// images and in docker/redis.Dockerfile too). Debian's redis-server, linked
// with jemalloc, hangs under libfaketime ("unexpected recursive calls to
// clock_gettime()") unless glibc's debug malloc is preloaded first.
const (
	Lib         = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
	MallocDebug = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
	// InstallFix tells how to get them on Debian.
	InstallFix = "install libfaketime (apt-get install libfaketime) or run scripts/setup"
)

// Libs are the files LD_PRELOAD names, in order.
var Libs = []string{MallocDebug, Lib}

// File is where libfaketime reads the clock offset of the node whose
// directory is dir.
func File(dir string) string { return filepath.Join(dir, "faketime") }

// Env is the environment that starts a server under libfaketime reading
// file. Only the wall clock moves: CLOCK_MONOTONIC stays shared with the
// host, which times the history.
func Env(file string) []string {
	return []string{
		"LD_PRELOAD=" + MallocDebug + ":" + Lib,
		"FAKETIME_TIMESTAMP_FILE=" + file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// Write sets the offset in libfaketime's relative format ("+20.000" or
// "-1.500" seconds), replacing the file atomically so that the server never
// reads half a line.
func Write(file string, offset time.Duration) error {
	text := fmt.Sprintf("%+.3f\n", offset.Seconds())
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// WallClock is one node's wall clock as libfaketime sees it: the offset in
// force, kept in the node's clock file. Node types embed it.
type WallClock struct {
	node string
	file string // "" for a node on the real clock
	mu   sync.Mutex
	off  time.Duration
}

// NewWallClock is the clock of the node named node whose directory is dir;
// only a node started under libfaketime (fake) has one to move.
func NewWallClock(node, dir string, fake bool) *WallClock {
	c := &WallClock{node: node}
	if fake {
		c.file = File(dir)
	}
	return c
}

// ClockFile is where the node's libfaketime reads the offset, "" for a node
// on the real clock.
func (c *WallClock) ClockFile() string { return c.file }

// SetClock moves the node's wall clock to offset from the real one.
func (c *WallClock) SetClock(offset time.Duration) error {
	if c.file == "" {
		return fmt.Errorf("%s runs on the real clock (its backend does not start it under libfaketime)", c.node)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = offset
	return Write(c.file, offset)
}

// Clock is the offset in force.
func (c *WallClock) Clock() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// WriteClockFile writes the offset in force, for a server about to start.
func (c *WallClock) WriteClockFile() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Write(c.file, c.off)
}
