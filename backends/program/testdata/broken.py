"""A lock client that breaks one rule of the client protocol, named by its
first argument, and otherwise keeps an in-memory lock of its own (enough
for the tests of package program, which need no server)."""
import json
import sys
import time

mode = sys.argv[1]
held = {}
if mode in ("dieinit", "hanginit"):
    # The first start (the harness's probe) works; every later one does
    # not: it dies as a missing module would, or never answers init.
    import os
    marker = sys.argv[2]
    if os.path.exists(marker):
        if mode == "hanginit":
            sys.stderr.write("connecting to redis at 127.0.0.1:1...\n")
            sys.stderr.flush()
            time.sleep(600)
        sys.stderr.write("Traceback (most recent call last):\n  File \"lock.py\", line 3\n")
        sys.stderr.write("ModuleNotFoundError: No module named 'nosuchlib'\n")
        sys.exit(1)
    open(marker, "w").close()
n = 0


def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    req = json.loads(line)
    t, mid = req["type"], req.get("msg_id")
    if t == "init":
        if mode == "noinit":
            time.sleep(60)
        if mode == "notjson":
            sys.stdout.write("hello, lockcheck\n")
            sys.stdout.flush()
            continue
        if mode == "flood":
            chunk = "x" * 65536 + "\n"
            for _ in range(600):  # 39 MB
                sys.stderr.write(chunk)
        send({"type": "init_ok", "in_reply_to": mid, "library": "broken-" + mode, "version": "0",
              "supports": {"extend": False, "inspect": False, "fence": False}})
        if mode == "noreq":
            send({"type": "release_ok", "in_reply_to": 99, "deleted": True})
    elif t == "acquire":
        if mode == "unknowntype":
            send({"type": "acquire_yes", "in_reply_to": mid})
        elif mode == "missingfield":
            send({"type": "acquire_ok", "in_reply_to": mid, "ttl_ms": 500})
        elif mode == "crash":
            sys.exit(1)
        elif mode != "sametoken" and req["key"] in held and held[req["key"]] > time.monotonic():
            send({"type": "error", "in_reply_to": mid, "code": 40, "text": "held"})
        else:
            n += 1
            held[req["key"]] = time.monotonic() + 0.3
            reply = {"type": "acquire_ok", "in_reply_to": mid, "token": "%s-t%d" % (id(held), n), "ttl_ms": 300}
            if mode == "nottl":
                del reply["ttl_ms"]
            if mode == "sametoken":
                reply["token"] = "t"
            send(reply)
    elif t == "release":
        send({"type": "release_ok", "in_reply_to": mid, "deleted": held.pop(req["key"], 0) > time.monotonic()})
