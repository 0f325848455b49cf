// Command goclient is a lock client program for the tests and the
// benchmark of package program: lockcheck's Redis recipe (SET NX PX, a
// fence by INCR, a compare-and-delete release) behind the client protocol.
// With -watchdog it renews its lease every TTL/3 and says so (renewed),
// stopping at the failpoint before-renew when init aims at it.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	release = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	extend  = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)

type msg map[string]any

var (
	outMu sync.Mutex
	out   = bufio.NewWriter(os.Stdout)
)

func send(m msg) {
	b, _ := json.Marshal(m)
	outMu.Lock()
	defer outMu.Unlock()
	out.Write(append(b, '\n'))
	out.Flush()
}

func main() {
	watchdog := flag.Bool("watchdog", false, "renew every TTL/3 and report renewed")
	noFence := flag.Bool("nofence", false, "declare no fence (supports.fence false) and send none")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	var (
		rdb       *redis.Client
		ttl       time.Duration
		aimed     []string
		fpID      = int64(1 << 40)
		fpReplies = map[int64]chan struct{}{}
		fpMu      sync.Mutex
		stopRenew = map[string]chan struct{}{}
	)
	failpoint := func(name string) {
		if !slices.Contains(aimed, name) {
			return
		}
		fpMu.Lock()
		fpID++
		id, ch := fpID, make(chan struct{})
		fpReplies[id] = ch
		fpMu.Unlock()
		send(msg{"type": "failpoint", "msg_id": id, "name": name})
		<-ch
	}
	ctx := context.Background()
	for in.Scan() {
		var req struct {
			Type       string   `json:"type"`
			MsgID      int64    `json:"msg_id"`
			InReplyTo  int64    `json:"in_reply_to"`
			Addrs      []string `json:"addrs"`
			TTLms      int64    `json:"ttl_ms"`
			TimeoutMs  int64    `json:"timeout_ms"`
			Failpoints []string `json:"failpoints"`
			Key, Token string
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "goclient: bad line:", err)
			continue
		}
		reply := msg{"in_reply_to": req.MsgID}
		fail := func(code int, err error) { reply["type"], reply["code"], reply["text"] = "error", code, err.Error() }
		switch req.Type {
		case "init":
			ttl, aimed = time.Duration(req.TTLms)*time.Millisecond, req.Failpoints
			timeout := time.Duration(req.TimeoutMs) * time.Millisecond
			rdb = redis.NewClient(&redis.Options{Addr: req.Addrs[0], ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1})
			reply["type"], reply["library"], reply["version"] = "init_ok", "go-redis", "v9"
			reply["supports"] = msg{"extend": true, "inspect": true, "fence": !*noFence}
			if *watchdog {
				reply["failpoints"] = []string{"before-renew"}
			}
		case "failpoint_ok":
			fpMu.Lock()
			if ch, ok := fpReplies[req.InReplyTo]; ok {
				close(ch)
				delete(fpReplies, req.InReplyTo)
			}
			fpMu.Unlock()
			continue
		case "acquire":
			token := newToken()
			ok, err := rdb.SetNX(ctx, req.Key, token, ttl).Result()
			switch {
			case err != nil:
				fail(0, err)
			case !ok:
				fail(40, fmt.Errorf("held by another client"))
			default:
				fence, err := rdb.Incr(ctx, req.Key+":fence").Result()
				if err != nil {
					fail(0, err)
					break
				}
				reply["type"], reply["token"], reply["ttl_ms"] = "acquire_ok", token, ttl.Milliseconds()
				if !*noFence {
					reply["fence"] = fence
				}
				if *watchdog {
					stop := make(chan struct{})
					stopRenew[token] = stop
					go renew(rdb, req.Key, token, ttl, stop, failpoint)
				}
			}
		case "release":
			if stop, ok := stopRenew[req.Token]; ok {
				close(stop)
				delete(stopRenew, req.Token)
			}
			n, err := release.Run(ctx, rdb, []string{req.Key}, req.Token).Int()
			if err != nil {
				fail(0, err)
				break
			}
			reply["type"], reply["deleted"] = "release_ok", n == 1
		case "extend":
			n, err := extend.Run(ctx, rdb, []string{req.Key}, req.Token, ttl.Milliseconds()).Int()
			if err != nil {
				fail(0, err)
				break
			}
			reply["type"], reply["extended"], reply["ttl_ms"] = "extend_ok", n == 1, ttl.Milliseconds()
		case "inspect":
			v, err := rdb.Get(ctx, req.Key).Result()
			if err == redis.Nil {
				reply["type"], reply["state"] = "inspect_ok", "free"
				break
			}
			if err != nil {
				fail(0, err)
				break
			}
			left, _ := rdb.PTTL(ctx, req.Key).Result()
			reply["type"], reply["state"] = "inspect_ok", fmt.Sprintf("held by %s, %d ms left", v, left.Milliseconds())
		default:
			fail(10, fmt.Errorf("unknown request %q", req.Type))
		}
		send(reply)
	}
}

// renew is the watchdog: every TTL/3 it pushes the lease out, until the
// release stops it or the lease is no longer the token's.
func renew(rdb *redis.Client, key, token string, ttl time.Duration, stop chan struct{}, failpoint func(string)) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		failpoint("before-renew")
		n, err := extend.Run(context.Background(), rdb, []string{key}, token, ttl.Milliseconds()).Int()
		if err != nil || n != 1 {
			why := "renewal failed: not owner"
			if err != nil {
				why = "renewal failed: " + err.Error()
			}
			send(msg{"type": "lost", "key": key, "token": token, "why": why})
			return
		}
		send(msg{"type": "renewed", "key": key, "token": token, "ttl_ms": ttl.Milliseconds()})
	}
}

func newToken() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
