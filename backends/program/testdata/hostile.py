"""A lock client that keeps an in-memory lock of its own and breaks one
rule of the client protocol where a break used to pass unseen (issue 38),
named by its first argument:

  dupreply      answers every release twice
  deleted1      answers release with "deleted": 1
  wrongtype     answers release with extend_ok
  fpflood       floods failpoint messages at each acquire, never answering it
  lostwithgrant sends lost in the same write as acquire_ok
  ttlmax        reports ttl_ms 9223372036854775807 (overflows ms -> ns)
  ttl584y       reports ttl_ms 18446744074210 (584 years)
  badutf8       sends a token with a byte that is not UTF-8
  surrogate     sends a token escaped as a lone UTF-16 surrogate
  good          breaks nothing
"""
import json
import sys
import time

mode = sys.argv[1]
out = sys.stdout.buffer
held = {}
n = 0


def line(m):
    return json.dumps(m).encode() + b"\n"


def send(*data):
    out.write(b"".join(data))
    out.flush()


for raw in sys.stdin:
    req = json.loads(raw)
    t, mid = req["type"], req.get("msg_id")
    if t == "init":
        send(line({"type": "init_ok", "in_reply_to": mid, "library": "hostile-" + mode, "version": "0",
                   "supports": {"extend": False, "inspect": False, "fence": False},
                   "failpoints": ["before-renew"]}))
    elif t == "acquire":
        key = req["key"]
        if mode == "fpflood":
            for i in range(1 << 30):
                send(line({"type": "failpoint", "msg_id": i + 1, "name": "before-renew"}))
        if key in held and held[key] > time.monotonic():
            send(line({"type": "error", "in_reply_to": mid, "code": 40, "text": "held"}))
            continue
        n += 1
        held[key] = time.monotonic() + 0.3
        token = "t%d" % n
        reply = {"type": "acquire_ok", "in_reply_to": mid, "token": token, "ttl_ms": 300}
        if mode == "ttlmax":
            reply["ttl_ms"] = 9223372036854775807
        if mode == "ttl584y":
            reply["ttl_ms"] = 18446744074210
        if mode == "badutf8":
            send(line(reply).replace(token.encode(), token.encode() + b"\xff"))
        elif mode == "surrogate":
            send(line(reply).replace(token.encode(), token.encode() + b"\\udc80"))
        elif mode == "lostwithgrant":
            send(line(reply), line({"type": "lost", "key": key, "token": token, "why": "at once"}))
        else:
            send(line(reply))
    elif t == "release":
        deleted = held.pop(req["key"], 0) > time.monotonic()
        reply = {"type": "release_ok", "in_reply_to": mid, "deleted": deleted}
        if mode == "deleted1":
            reply["deleted"] = 1
        if mode == "wrongtype":
            reply = {"type": "extend_ok", "in_reply_to": mid, "extended": deleted}
        send(line(reply))
        if mode == "dupreply":
            send(line(reply))
