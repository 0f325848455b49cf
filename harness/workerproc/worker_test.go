package workerproc_test

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/nodetest"
	"github.com/lockcheck/lockcheck/harness/workerproc"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
	"github.com/lockcheck/lockcheck/workloads/resource"
)

// worker runs a worker of the redis backend against a live redis-server and
// the harness's resource, in this process, and returns its stdin, its
// messages, and the result of Run once it ends.
func worker(t *testing.T, cfg workerproc.Config) (io.WriteCloser, <-chan workerproc.Message, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	msgs := make(chan workerproc.Message, 1024)
	done := make(chan error, 1)
	go func() {
		err := workerproc.Run(cfg, inR, outW)
		outW.Close()
		done <- err
	}()
	go func() {
		defer close(msgs)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m workerproc.Message
			if assert.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a message is one JSON line: %s", sc.Text()) {
				msgs <- m
			}
		}
	}()
	t.Cleanup(func() { inW.Close() })
	return inW, msgs, done
}

func redisConfig(t *testing.T) workerproc.Config {
	addr, _ := nodetest.Redis(t)
	srv, err := resource.Serve(nopCloser{io.Discard}, false)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return workerproc.Config{
		Lock:    catalog.Spec{Backend: "redis", Variant: "correct", Addrs: []string{addr}, TTL: time.Second, Fence: true, Timeout: time.Second},
		Process: 0, Stride: 1, Keys: []string{"lock-0"}, Think: "1ms", Retry: 5 * time.Millisecond, OpTimeout: time.Second,
		Seed: 1, ResourceAddr: srv.Addr(),
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// next reads messages until one satisfies want, failing after a while.
func next(t *testing.T, msgs <-chan workerproc.Message, what string, want func(workerproc.Message) bool) workerproc.Message {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-msgs:
			require.True(t, ok, "the worker ended before %s", what)
			if want(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s within 20 s", what)
		}
	}
}

// The harness's protocol with a worker: ready first, then the client's
// events; an armed failpoint parks the client there and says so until
// "go"; "stop" ends the worker after its cycle.
func TestWorkerSpeaksTheHarnessProtocol(t *testing.T) {
	cfg := redisConfig(t)
	cfg.Held = true // parked before its first acquire, as at a soak's start
	in, msgs, done := worker(t, cfg)

	first := <-msgs
	assert.True(t, first.Ready, "the first message says the client opened: %+v", first)
	parked := next(t, msgs, "a park before the first acquire", func(m workerproc.Message) bool { return m.Failpoint != "" })
	assert.Equal(t, workloads.FailpointBeforeAcquire, parked.Failpoint)

	_, err := io.WriteString(in, workerproc.CmdDisarm+" "+workloads.FailpointBeforeAcquire+"\n"+
		workerproc.CmdArm+" "+workloads.FailpointBeforeWrite+"\n"+workerproc.CmdGo+"\n")
	require.NoError(t, err)
	grant := next(t, msgs, "a grant", func(m workerproc.Message) bool {
		return m.Event != nil && m.Event.F == history.FAcquire && m.Event.Type == history.OK
	})
	assert.Equal(t, history.Process(0), grant.Process)
	parked = next(t, msgs, "a park before the write", func(m workerproc.Message) bool { return m.Failpoint != "" })
	assert.Equal(t, workloads.FailpointBeforeWrite, parked.Failpoint)

	_, err = io.WriteString(in, workerproc.CmdDisarm+" "+workloads.FailpointBeforeWrite+"\n"+workerproc.CmdGo+"\n")
	require.NoError(t, err)
	next(t, msgs, "the write after the park", func(m workerproc.Message) bool {
		return m.Event != nil && m.Event.F == history.FWrite && m.Event.Type == history.OK
	})
	_, err = io.WriteString(in, workerproc.CmdStop+"\n")
	require.NoError(t, err)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
}

// A client that cannot be opened says why in one message, and Run fails.
func TestWorkerThatCannotOpenItsClientSaysWhy(t *testing.T) {
	cfg := redisConfig(t)
	cfg.Process = 3
	cfg.Lock.Variant = "setex"
	_, msgs, done := worker(t, cfg)
	m := <-msgs
	assert.Equal(t, history.Process(3), m.Process)
	assert.Contains(t, m.Failed, `backend redis has no variant "setex"`)
	assert.Error(t, <-done)
}
