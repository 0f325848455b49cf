"""The lockcheck client protocol, version 1 (docs/clients.md), for Python clients.

A client subclasses Client, answers the requests it supports in methods named
after them (acquire, release, extend, inspect: each gets the request and
returns the reply's fields, or raises Error) and calls run(). Replies and the
messages a library's own threads send (renewed, lost, failpoint) go through
send(), which writes one line and flushes it, from any thread.
"""

import json
import queue
import sys
import threading

PROTOCOL = 1

# Definite error codes (the operation certainly did not take effect); every
# other code is indefinite.
NOT_SUPPORTED = 10
TEMPORARILY_UNAVAILABLE = 11  # the service refused to write (READONLY, NOREPLICAS)
NOT_SENT = 41  # the client refused itself: not connected, nothing was sent
MALFORMED_REQUEST = 12
LOCK_HELD = 40
# Indefinite ones.
TIMEOUT = 0
CRASH = 13


class Error(Exception):
    """A request's error reply: code and text."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Client:
    library = "unnamed"
    version = "0"
    supports = {"extend": False, "inspect": False, "fence": False}
    # Every failpoint this client can stop at.
    failpoints = []

    def __init__(self):
        self._out = threading.Lock()
        self._msg_id = 0
        self._waiting = {}  # msg_id of a failpoint -> its event
        self._requests = queue.Queue()
        self.aimed = set()  # the failpoints this run waits for

    def send(self, msg):
        with self._out:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()

    def failpoint(self, name):
        """Stops the calling thread at name until lockcheck lets it go on,
        if this run aims at name; costs nothing otherwise."""
        if name not in self.aimed:
            return
        done = threading.Event()
        with self._out:
            self._msg_id += 1
            msg_id = self._msg_id
            self._waiting[msg_id] = done
        self.send({"type": "failpoint", "msg_id": msg_id, "name": name})
        done.wait()

    def init(self, req):
        """Connects to the service; req is the init message."""

    def run(self):
        # stdin is read on a thread of its own, so that a failpoint_ok reaches
        # a thread stopped at a failpoint while the main thread is inside a
        # request (a failpoint on the request's own path).
        threading.Thread(target=self._read, daemon=True).start()
        while True:
            req = self._requests.get()
            if req is None:
                return
            self._answer(req)

    def _read(self):
        for line in sys.stdin:
            try:
                msg = json.loads(line)
            except ValueError:
                log("not JSON:", line[:200].rstrip())
                continue
            if msg.get("type") == "failpoint_ok":
                with self._out:
                    done = self._waiting.pop(msg.get("in_reply_to"), None)
                if done:
                    done.set()
                continue
            self._requests.put(msg)
        self._requests.put(None)

    def _answer(self, req):
        kind, msg_id = req.get("type"), req.get("msg_id")
        try:
            if kind == "init":
                self.aimed = set(req.get("failpoints") or [])
                self.init(req)
                reply = {"library": self.library, "version": self.version,
                         "supports": self.supports, "failpoints": self.failpoints}
            elif kind in ("acquire", "release") or self.supports.get(kind):
                reply = getattr(self, kind)(req)
            else:
                raise Error(NOT_SUPPORTED, "unsupported request type %r" % kind)
        except Error as e:
            self.send({"type": "error", "in_reply_to": msg_id, "code": e.code, "text": e.text})
            return
        except Exception as e:  # the library failed in a way nobody knows the outcome of
            log("%s %s: %r" % (kind, req.get("key", ""), e))
            self.send({"type": "error", "in_reply_to": msg_id, "code": CRASH, "text": repr(e)})
            return
        reply.update(type=kind + "_ok", in_reply_to=msg_id)
        self.send(reply)
