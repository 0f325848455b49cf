"""A Redis lock client (SET key token NX PX ttl, a token-checked release, a
watchdog that renews every third of the lease) that tells one lie about
its lease, named by its first argument; "honest" tells none. It speaks
RESP itself: the tests need no Redis library.

  overclaim  reports a lease twenty times the PX it set
  fakerenew  reports renewals its watchdog never sends
  wallclock  renews, and says when on the wall clock (time.time_ns)
  cputime    renews, and says when on the process's CPU clock
  fakeextend answers extend with extended true, and extends nothing
  dies       tells no lie; as c0, exits 50 ms after its second grant
"""
import json
import os
import socket
import sys
import threading
import time

mode = sys.argv[1]
out = threading.Lock()


def send(m):
    with out:
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()


class Redis:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.f = self.sock.makefile("rb")
        self.mu = threading.Lock()

    def call(self, *args):
        cmd = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            cmd += b"$%d\r\n%s\r\n" % (len(a), a)
        with self.mu:
            self.sock.sendall(cmd)
            return self.reply()

    def reply(self):
        line = self.f.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("RESP reply %r" % line)


RELEASE = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'
EXTEND = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end'
rdb, ttl, n = None, 0, 0
watchdogs = {}  # token -> the Event that stops its watchdog


def sent_ns():
    if mode == "wallclock":
        return time.time_ns()
    if mode == "cputime":
        return time.process_time_ns()
    return time.monotonic_ns()


def watchdog(key, token, stop):
    if mode == "fakeextend":
        return  # its extends are what it lies about
    while not stop.wait(ttl / 3000):
        sent = sent_ns()
        if mode != "fakerenew" and rdb.call("EVAL", EXTEND, 1, key, token, ttl) != 1:
            send({"type": "lost", "key": key, "token": token, "why": "renewal failed"})
            return
        send({"type": "renewed", "key": key, "token": token, "ttl_ms": ttl, "sent_ns": sent})


for line in sys.stdin:
    req = json.loads(line)
    t, mid = req["type"], req.get("msg_id")
    if t == "init":
        rdb, ttl, slot = Redis(req["addrs"][0]), req["ttl_ms"], req["client"]
        send({"type": "init_ok", "in_reply_to": mid, "library": "liar-" + mode, "version": "0",
              "supports": {"extend": True, "inspect": False, "fence": False}})
    elif t == "acquire":
        n += 1
        token = "%d-%d" % (os.getpid(), n)
        if rdb.call("SET", req["key"], token, "NX", "PX", ttl) != "OK":
            send({"type": "error", "in_reply_to": mid, "code": 40, "text": "held"})
            continue
        claimed = ttl * 20 if mode == "overclaim" else ttl
        send({"type": "acquire_ok", "in_reply_to": mid, "token": token, "ttl_ms": claimed})
        stop = threading.Event()
        watchdogs[token] = stop
        threading.Thread(target=watchdog, args=(req["key"], token, stop), daemon=True).start()
        if mode == "dies" and slot == "c0" and n == 2:
            threading.Timer(0.05, os._exit, args=(0,)).start()
    elif t == "extend":
        ok = mode == "fakeextend" or rdb.call("EVAL", EXTEND, 1, req["key"], req["token"], ttl) == 1
        send({"type": "extend_ok", "in_reply_to": mid, "extended": ok, "ttl_ms": ttl})
    elif t == "release":
        stop = watchdogs.pop(req["token"], None)
        if stop:
            stop.set()
        deleted = rdb.call("EVAL", RELEASE, 1, req["key"], req["token"]) == 1
        send({"type": "release_ok", "in_reply_to": mid, "deleted": deleted})
