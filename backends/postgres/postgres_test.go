package postgres_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/postgres"
	"github.com/lockcheck/lockcheck/harness/procstate"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads/pgresource"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// The node is this test binary started again with postgres.NodeEnv set.
func TestMain(m *testing.M) {
	if postgres.RunNodeFromEnv() {
		return
	}
	os.Exit(m.Run())
}

// startNode starts a real PostgreSQL node and stops it, and every process
// it forked, when the test ends.
func startNode(t *testing.T) string {
	t.Helper()
	server, err := postgres.Server.Find(postgres.Server.Name)
	if err != nil {
		t.Fatalf("PostgreSQL is not installed (run scripts/setup): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	self, err := os.Executable()
	require.NoError(t, err)
	ep := backends.Endpoint{Name: postgres.Primary, Ports: []int{port}, Dir: t.TempDir()}
	spec := postgres.Node(postgres.Primary, self, server)
	cmd := exec.Command(self, spec.Args(ep, nil)...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // killed below
	t.Cleanup(func() {
		tree := procstate.Descendants(cmd.Process.Pid)
		starts := map[int]string{}
		for _, pid := range tree {
			starts[pid], _ = procstate.StartTime(pid)
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone is fine
		for _, pid := range tree {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // gone is fine
		}
		<-exited
		for _, pid := range tree {
			assert.Eventually(t, func() bool { return !procstate.Runs(pid, starts[pid]) }, 10*time.Second, 50*time.Millisecond, "postgres process %d outlived the test", pid)
		}
	})
	addr := ep.Addr()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return spec.Ready(ctx, addr) == nil
	}, 90*time.Second, 100*time.Millisecond, "postgres did not become ready (logs in %s)", ep.Dir)
	require.NoError(t, postgres.Prepare(context.Background(), addr))
	return addr
}

func open(t *testing.T, addr, variant string) *postgres.Lock {
	t.Helper()
	l, err := postgres.New(postgres.Options{Addr: addr, Variant: variant, Fence: true, Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestAdvisoryLocksOnALiveServer(t *testing.T) {
	t.Parallel()
	addr := startNode(t)
	ctx := context.Background()
	svc := postgres.NewService([]backends.Endpoint{{Name: postgres.Primary, Ports: []int{port(t, addr)}}})

	t.Run("session lock: exclusive, released once, fences rise", func(t *testing.T) {
		a, b := open(t, addr, postgres.Session), open(t, addr, postgres.Session)
		ga, err := a.Acquire(ctx, "k1")
		require.NoError(t, err)
		assert.NotEmpty(t, ga.Session)
		assert.Zero(t, ga.TTL, "a session lock has no TTL")
		_, err = b.Acquire(ctx, "k1")
		assert.ErrorIs(t, err, backends.ErrNotAcquired)
		released, err := a.Release(ctx, "k1", ga)
		require.NoError(t, err)
		assert.True(t, released)
		released, err = a.Release(ctx, "k1", ga)
		require.NoError(t, err)
		assert.False(t, released, "pg_advisory_unlock of a lock not held returns false")
		gb, err := b.Acquire(ctx, "k1")
		require.NoError(t, err)
		assert.Greater(t, *gb.Fence, *ga.Fence)
		_, err = b.Release(ctx, "k1", gb)
		require.NoError(t, err)
	})

	t.Run("a terminated session frees its lock; its client learns at its next statement", func(t *testing.T) {
		a, b := open(t, addr, postgres.Session), open(t, addr, postgres.Session)
		ga, err := a.Acquire(ctx, "k2")
		require.NoError(t, err)
		landed, err := svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.True(t, landed)
		var gb backends.Grant
		require.Eventually(t, func() bool {
			gb, err = b.Acquire(ctx, "k2")
			return err == nil
		}, 5*time.Second, 10*time.Millisecond, "the lock stayed held after its session was terminated: %v", err)
		_, err = a.Release(ctx, "k2", ga)
		assert.Error(t, err, "the killed client learns only now")
		landed, err = svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		assert.False(t, landed, "a session already gone is no kill")
		inspect, err := b.Inspect(ctx, "k2")
		require.NoError(t, err)
		assert.Contains(t, inspect, "held by backend pid")
		_, err = b.Release(ctx, "k2", gb)
		require.NoError(t, err)
	})

	t.Run("xact lock: the write commits with the lock or not at all", func(t *testing.T) {
		require.NoError(t, pgresource.Setup(ctx, addr, []string{"k3"}))
		write := func(l *postgres.Lock, process int, value int64) (resource.WriteReply, error) {
			store := pgresource.Open(addr, 2*time.Second, false)
			defer store.Close()
			store.InLockTx(l)
			return store.Write(ctx, resource.WriteRequest{Key: "k3", Process: history.Process(process), Req: fmt.Sprint(process), Value: value})
		}
		a, b := open(t, addr, postgres.Xact), open(t, addr, postgres.Xact)
		ga, err := a.Acquire(ctx, "k3")
		require.NoError(t, err)
		reply, err := write(a, 1, 100)
		require.NoError(t, err)
		assert.True(t, reply.Accepted)
		landed, err := svc.TerminateSession(ctx, ga.Session)
		require.NoError(t, err)
		require.True(t, landed)
		_, err = a.Release(ctx, "k3", ga)
		assert.Error(t, err, "the commit of a terminated session fails")

		gb, err := b.Acquire(ctx, "k3")
		require.NoError(t, err)
		reply, err = write(b, 2, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(0), reply.Prev, "the killed client's write never committed")
		ok, err := b.Release(ctx, "k3", gb)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

func port(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(p, &n)
	require.NoError(t, err)
	return n
}

func TestDatabaseFencesStaleWrites(t *testing.T) {
	t.Parallel()
	addr := startNode(t)
	ctx := context.Background()
	require.NoError(t, pgresource.Setup(ctx, addr, []string{"k"}))
	store := pgresource.Open(addr, 2*time.Second, true)
	defer store.Close()
	tests := []struct {
		name     string
		fence    *int64
		accepted bool
		reason   string
	}{
		{"first fence", history.Int64(5), true, ""},
		{"lower fence", history.Int64(3), false, "fence 3 is not above fence_token 5"},
		{"same fence", history.Int64(5), false, "WHERE fence_token < 5 matched no row"},
		{"no fence", nil, false, "no fence"},
		{"higher fence", history.Int64(9), true, ""},
	}
	for i, tt := range tests {
		reply, err := store.Write(ctx, resource.WriteRequest{Key: "k", Process: 1, Req: fmt.Sprint(i), Fence: tt.fence, Read: int64(i), Value: int64(i + 1)})
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.accepted, reply.Accepted, tt.name)
		assert.Contains(t, reply.Reason, tt.reason, tt.name)
	}
	path := filepath.Join(t.TempDir(), "resource.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, pgresource.Export(ctx, addr, f))
	require.NoError(t, f.Close())
	log, err := history.ReadResourceLog(path)
	require.NoError(t, err)
	require.Len(t, log, len(tests), "every write, accepted or refused, is in the audit table")
	for i, e := range log {
		assert.Equal(t, tests[i].accepted, e.Accepted, tests[i].name)
		assert.Equal(t, int64(i+1), e.Seq)
	}
}
