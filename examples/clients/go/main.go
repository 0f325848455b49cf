// Command lockclient is lockcheck's own Redis recipe (backends/redis, variant
// correct) written as a lock client of the protocol (docs/clients.md): SET
// key token NX PX ttl, a fence from INCR of lockcheck:fence:<key>, release and
// extend by Lua scripts that compare the token first. Run side by side with
// the built-in backend, it measures what the protocol itself costs.
//
// With -watchdog it renews each lease every TTL/3 until the release, as
// Redisson's watchdog does, and says so (renewed, with when it sent the
// renewal), stopping at the failpoint before-renew when init aims at it.
// With -nofence it declares no fence and sends none. backends/program's
// tests and benchmark and the CLI's end-to-end tests build this client.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

var (
	releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	extendScript  = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)

// Error codes of the protocol.
const (
	codeTimeout      = 0
	codeNotSupported = 10
	codeUnavailable  = 11
	codeNotSent      = 41
	codeMalformed    = 12
	codeCrash        = 13
	codeLockHeld     = 40
)

// beforeRenew is the failpoint right before each renewal of the watchdog.
const beforeRenew = "before-renew"

// message is every message from lockcheck this client reads.
type message struct {
	Type       string   `json:"type"`
	MsgID      int64    `json:"msg_id,omitempty"`
	InReplyTo  int64    `json:"in_reply_to,omitempty"`
	Key        string   `json:"key,omitempty"`
	Token      string   `json:"token,omitempty"`
	Addrs      []string `json:"addrs,omitempty"`
	TTLms      int64    `json:"ttl_ms,omitempty"`
	TimeoutMs  int64    `json:"timeout_ms,omitempty"`
	Failpoints []string `json:"failpoints,omitempty"`
}

type protoError struct {
	code int
	text string
}

func (e protoError) Error() string { return e.text }

type client struct {
	rdb      *redis.Client
	ttl      time.Duration
	lease    time.Duration // -lease: the library's own, whatever init asks
	timeout  time.Duration
	watchdog bool
	fence    bool
	aimed    []string // the failpoints init aims at

	// outMu keeps the watchdogs' lines and the replies whole.
	outMu sync.Mutex
	// fpMu guards the failpoints waiting for their failpoint_ok, by msg_id.
	fpMu    sync.Mutex
	fpID    int64
	parked  map[int64]chan struct{}
	renewal map[string]chan struct{} // a watchdog's stop, by token
}

func main() {
	watchdog := flag.Bool("watchdog", false, "renew each lease every TTL/3 until its release, and report renewed")
	noFence := flag.Bool("nofence", false, "declare no fence (supports.fence false) and send none")
	lease := flag.Duration("lease", 0, "take leases of this length whatever init's ttl_ms asks, as a library with a default of its own does (python-etcd3: 60s); 0: init's")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	c := &client{watchdog: *watchdog, fence: !*noFence, lease: *lease, parked: map[int64]chan struct{}{}, renewal: map[string]chan struct{}{}}
	for in.Scan() {
		var req message
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "not JSON: %.200s\n", in.Text())
			continue
		}
		if req.Type == "failpoint_ok" {
			c.fpMu.Lock()
			if ch, ok := c.parked[req.InReplyTo]; ok {
				close(ch)
				delete(c.parked, req.InReplyTo)
			}
			c.fpMu.Unlock()
			continue
		}
		reply, err := c.handle(req)
		if err != nil {
			var pe protoError
			if !errors.As(err, &pe) {
				pe = classify(err)
			}
			reply = map[string]any{"type": "error", "code": pe.code, "text": pe.text}
		} else {
			reply["type"] = req.Type + "_ok"
		}
		reply["in_reply_to"] = req.MsgID
		c.send(reply)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "stdin:", err)
		os.Exit(1)
	}
}

// send writes one line, whole, whichever goroutine sends it.
func (c *client) send(m map[string]any) {
	line, _ := json.Marshal(m)
	c.outMu.Lock()
	defer c.outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func (c *client) handle(req message) (map[string]any, error) {
	if req.Type != "init" && c.rdb == nil {
		return nil, protoError{codeMalformed, req.Type + " before init"}
	}
	ctx := context.Background()
	switch req.Type {
	case "init":
		if len(req.Addrs) != 1 {
			return nil, protoError{codeNotSupported, fmt.Sprintf("this recipe runs on one Redis, not on %d addresses", len(req.Addrs))}
		}
		c.ttl = time.Duration(req.TTLms) * time.Millisecond
		if c.lease > 0 {
			c.ttl = c.lease
		}
		c.timeout = time.Duration(req.TimeoutMs) * time.Millisecond
		c.aimed = req.Failpoints
		c.rdb = redis.NewClient(&redis.Options{
			Addr: req.Addrs[0], DialTimeout: c.timeout, ReadTimeout: c.timeout, WriteTimeout: c.timeout,
			// A retried SET NX could succeed the first time and fail the second.
			MaxRetries: -1, PoolSize: 2,
		})
		failpoints := []string{}
		if c.watchdog {
			failpoints = append(failpoints, beforeRenew)
		}
		return map[string]any{
			"library": "go-redis", "version": redis.Version(),
			"supports":   map[string]bool{"extend": true, "inspect": true, "fence": c.fence},
			"failpoints": failpoints,
		}, nil
	case "acquire":
		token, err := newToken()
		if err != nil {
			return nil, err
		}
		ok, err := c.rdb.SetNX(ctx, req.Key, token, c.ttl).Result()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, protoError{codeLockHeld, "held by another client"}
		}
		granted := map[string]any{"token": token, "ttl_ms": c.ttl.Milliseconds()}
		if c.fence {
			fence, err := c.rdb.Incr(ctx, "lockcheck:fence:"+req.Key).Result()
			if err != nil {
				return nil, fmt.Errorf("lock taken but INCR of the fence failed: %w", err)
			}
			granted["fence"] = fence
		}
		if c.watchdog {
			stop := make(chan struct{})
			c.renewal[token] = stop
			go c.renew(req.Key, token, stop)
		}
		return granted, nil
	case "release":
		if stop, ok := c.renewal[req.Token]; ok {
			close(stop)
			delete(c.renewal, req.Token)
		}
		n, err := releaseScript.Run(ctx, c.rdb, []string{req.Key}, req.Token).Int()
		return map[string]any{"deleted": n == 1}, err
	case "extend":
		n, err := extendScript.Run(ctx, c.rdb, []string{req.Key}, req.Token, c.ttl.Milliseconds()).Int()
		return map[string]any{"extended": n == 1, "ttl_ms": c.ttl.Milliseconds()}, err
	case "inspect":
		pttl, err := c.rdb.PTTL(ctx, req.Key).Result()
		if err != nil {
			return nil, err
		}
		// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as that
		// many nanoseconds.
		switch pttl {
		case -2:
			return map[string]any{"state": req.Key + " is free"}, nil
		case -1:
			return map[string]any{"state": req.Key + " is held with no TTL: it never expires"}, nil
		}
		return map[string]any{"state": fmt.Sprintf("%s is held with %d ms left", req.Key, pttl.Milliseconds())}, nil
	}
	return nil, protoError{codeNotSupported, fmt.Sprintf("unsupported request type %q", req.Type)}
}

// renew is the watchdog of one grant: every TTL/3 it pushes the lease out
// and says so, until the release stops it or the lease is no longer the
// token's. A renewal whose outcome is unknown proves nothing: it tries
// again.
func (c *client) renew(key, token string, stop chan struct{}) {
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		c.failpoint(beforeRenew)
		// When the renewal left, on lockcheck's clock: the service renewed
		// the lease no earlier.
		sent := monotonicNs()
		n, err := extendScript.Run(context.Background(), c.rdb, []string{key}, token, c.ttl.Milliseconds()).Int()
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "renewal of %s: %v\n", key, err)
		case n != 1:
			c.send(map[string]any{"type": "lost", "key": key, "token": token, "why": "renewal failed: the key is no longer this token's"})
			return
		default:
			c.send(map[string]any{"type": "renewed", "key": key, "token": token, "ttl_ms": c.ttl.Milliseconds(), "sent_ns": sent})
		}
	}
}

// failpoint stops the calling goroutine at name until lockcheck answers,
// if init aims at it.
func (c *client) failpoint(name string) {
	if !slices.Contains(c.aimed, name) {
		return
	}
	c.fpMu.Lock()
	c.fpID++
	id, ch := c.fpID, make(chan struct{})
	c.parked[id] = ch
	c.fpMu.Unlock()
	c.send(map[string]any{"type": "failpoint", "msg_id": id, "name": name})
	<-ch
}

// monotonicNs reads CLOCK_MONOTONIC, the clock of lockcheck's history.
func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// classify turns a go-redis error into the protocol's: a connection never
// made (nothing was sent) or a write the server refused certainly did
// nothing; a timeout or a connection lost after sending leaves the outcome
// unknown.
func classify(err error) protoError {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return protoError{codeNotSent, err.Error()}
	}
	var reply redis.Error
	if errors.As(err, &reply) && (strings.HasPrefix(reply.Error(), "NOREPLICAS") || strings.HasPrefix(reply.Error(), "READONLY")) {
		return protoError{codeUnavailable, err.Error()}
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return protoError{codeTimeout, err.Error()}
	}
	return protoError{codeCrash, err.Error()}
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
