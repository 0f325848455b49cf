// Command lockclient is lockcheck's own Redis recipe (backends/redis, variant
// correct) written as a lock client of the protocol (docs/clients.md): SET
// key token NX PX ttl, a fence from INCR of lockcheck:fence:<key>, release and
// extend by Lua scripts that compare the token first. Run side by side with
// the built-in backend, it measures what the protocol itself costs.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	codeMalformed    = 12
	codeCrash        = 13
	codeLockHeld     = 40
)

// message is every message of the protocol this client reads or writes.
type message struct {
	Type      string   `json:"type"`
	MsgID     int64    `json:"msg_id,omitempty"`
	InReplyTo int64    `json:"in_reply_to,omitempty"`
	Key       string   `json:"key,omitempty"`
	Token     string   `json:"token,omitempty"`
	Addrs     []string `json:"addrs,omitempty"`
	TTLms     int64    `json:"ttl_ms,omitempty"`
	TimeoutMs int64    `json:"timeout_ms,omitempty"`
}

type protoError struct {
	code int
	text string
}

func (e protoError) Error() string { return e.text }

type client struct {
	rdb     *redis.Client
	ttl     time.Duration
	timeout time.Duration
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	c := &client{}
	for in.Scan() {
		var req message
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "not JSON: %.200s\n", in.Text())
			continue
		}
		if req.Type == "failpoint_ok" {
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
		line, _ := json.Marshal(reply)
		os.Stdout.Write(append(line, '\n'))
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "stdin:", err)
		os.Exit(1)
	}
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
		c.timeout = time.Duration(req.TimeoutMs) * time.Millisecond
		c.rdb = redis.NewClient(&redis.Options{
			Addr: req.Addrs[0], DialTimeout: c.timeout, ReadTimeout: c.timeout, WriteTimeout: c.timeout,
			// A retried SET NX could succeed the first time and fail the second.
			MaxRetries: -1, PoolSize: 2,
		})
		return map[string]any{
			"library": "go-redis", "version": redis.Version(),
			"supports":   map[string]bool{"extend": true, "inspect": true, "fence": true},
			"failpoints": []string{},
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
		fence, err := c.rdb.Incr(ctx, "lockcheck:fence:"+req.Key).Result()
		if err != nil {
			return nil, fmt.Errorf("lock taken but INCR of the fence failed: %w", err)
		}
		return map[string]any{"token": token, "ttl_ms": c.ttl.Milliseconds(), "fence": fence}, nil
	case "release":
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

// classify turns a go-redis error into the protocol's: a connection never
// made or a write the server refused certainly did nothing; a timeout or a
// connection lost after sending leaves the outcome unknown.
func classify(err error) protoError {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return protoError{codeUnavailable, err.Error()}
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
