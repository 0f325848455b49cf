package harness

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/results"
)

// A worker that dies just as the fleet stops is replaced, and its
// replacement must stop too: here every worker is killed at once and the
// fleet stopped a moment later, again and again, with workers that live
// until they read a line or the end of their stdin, which stop alone
// gives them. A replacement stop did not reach would keep stop waiting
// for good (the hang of a run whose program missed init).
func TestStopReachesAWorkerReplacedWhileStopping(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "worker.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nread line\n"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, results.LogsDir), 0o755))
	const clients = 5
	for round := range 30 {
		p := newProcs()
		h, err := history.NewWriter(discard{}, history.Header{})
		require.NoError(t, err)
		f := &fleet{
			cfg: Config{Executable: script, Run: history.RunConfig{Clients: clients}}, procs: p,
			rec: newRecorder(h, dir), log: slog.New(slog.DiscardHandler), logDir: dir,
			refused: make(chan struct{}),
		}
		for i := range clients {
			require.NoError(t, f.spawn(i, history.Process(i)))
		}
		for _, c := range f.Clients() {
			require.NoError(t, c.Signal(syscall.SIGKILL))
		}
		// Let some of them be seen dead and be replaced while stop runs.
		time.Sleep(time.Duration(round%4) * time.Millisecond)
		stopped := make(chan struct{})
		go func() { f.stop(time.Second); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			p.killAll(time.Second)
			t.Fatalf("round %d: the fleet did not stop within 30s of a 1s grace: a worker replaced while it stopped was never stopped", round)
		}
		for _, c := range f.Clients() {
			require.Equal(t, "gone", processState(c.PID()), "round %d: %s still runs", round, c.Name())
		}
		p.killAll(time.Second)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }
func (discard) Sync() error                 { return nil }
