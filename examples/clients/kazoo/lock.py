#!/usr/bin/python3
"""kazoo's Lock recipe on a ZooKeeper ensemble as a lockcheck client (protocol v1).

acquire is Lock.acquire(blocking=False): an ephemeral sequential znode under
/lockcheck-kazoo/<key>, granted when it is the lowest; release is
Lock.release(). The lock lives as long as the client's session, so acquire_ok
reports the session timeout the ensemble negotiated (ZooKeeper clamps the one
asked for, ttl_ms, to [2, 20] ticks) as the lease. The fence is the lock
znode's sequence number: ZooKeeper draws it from the parent's child counter,
which rises with every znode created under the parent, and a contender is
granted only once every lower znode is gone, so every grant of a key has a
higher number than the one before (as long as nobody deletes the parent).
It is sent plus one, so that the first grant's fence is 1, not 0.

kazoo's connection listener reports the session's state. LOST (the session
expired: ZooKeeper deleted every ephemeral znode of it) is sent as lost for
every grant held. SUSPENDED (the connection dropped) is not: the session and
its znodes may well live on, and kazoo resumes it on reconnecting within the
session timeout; the lock is lost only if that fails, which LOST then says.
"""

import logging
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import kazoo.version  # noqa: E402
from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.exceptions import ConnectionLoss, LockTimeout, OperationTimeoutError, SessionExpiredError  # noqa: E402
from kazoo.retry import KazooRetry, RetryFailedError  # noqa: E402
from kazoo.handlers.threading import KazooTimeoutError  # noqa: E402

import lockproto  # noqa: E402
from lockproto import Error  # noqa: E402

ROOT = "/lockcheck-kazoo/"
CONNECT_TIMEOUT = 5  # seconds, for the first connection, in init


class Negotiated(logging.Handler):
    """Reads the negotiated session timeout from kazoo's own log of the
    session it created (kazoo keeps it nowhere else)."""

    def __init__(self):
        super().__init__(level=1)
        self.timeout_ms = None

    def emit(self, record):
        if isinstance(record.msg, str) and record.msg.startswith("Session created"):
            self.timeout_ms = int(record.args[2])


class Kazoo(lockproto.Client):
    library = "kazoo"
    version = kazoo.version.__version__
    supports = {"extend": False, "inspect": True, "fence": True}

    def init(self, req):
        self.grants = {}  # token (the znode's path) -> (key, Lock)
        self.held = threading.Lock()
        self.negotiated = Negotiated()
        logger = logging.getLogger("kazoo.lockcheck")
        logger.setLevel(1)
        logger.propagate = False
        logger.addHandler(self.negotiated)
        self.timeout = req["timeout_ms"] / 1000
        self.zk = KazooClient(hosts=",".join(req["addrs"]), timeout=req["ttl_ms"] / 1000, logger=logger)
        self.zk.add_listener(self.state)
        try:
            # kazoo tries the servers in turn, each for a share of the session
            # timeout; an ensemble that just started, on a busy machine, may
            # take a few rounds. init may take seconds (lockcheck waits for it
            # before the run's time starts), an operation may not.
            self.zk.start(timeout=CONNECT_TIMEOUT)
        except KazooTimeoutError as e:
            self.zk.stop()
            raise Error(lockproto.TEMPORARILY_UNAVAILABLE, "no ZooKeeper server answered: %s" % e)

    def state(self, state):
        if state != KazooState.LOST:
            return
        with self.held:
            lost, self.grants = self.grants, {}
        for token, (key, _) in lost.items():
            self.send({"type": "lost", "key": key, "token": token, "why": "kazoo: session lost (expired)"})

    def acquire(self, req):
        key = req["key"]
        lock = self.zk.Lock(ROOT + key)
        if not call(lock.acquire, blocking=False, timeout=self.timeout):
            raise Error(lockproto.LOCK_HELD, "held by another client")
        token = lock.path + "/" + lock.node
        with self.held:
            self.grants[token] = (key, lock)
        return {"token": token, "ttl_ms": self.negotiated.timeout_ms, "fence": int(lock.node[-10:]) + 1}

    def release(self, req):
        token = req["token"]
        with self.held:
            grant = self.grants.get(token)
        if grant is None:  # lost, or never ours
            return {"deleted": False}
        # kazoo's release ignores a znode that is gone already (its session
        # expired): whether it deleted one is whether one was there. The
        # grant stays listed until then, so that a LOST noticed on the way
        # (a paused holder's first call reconnects and finds its session
        # expired) is still reported as lost. A connection lost on the way
        # is retried until the client knows which it was, as kazoo's own
        # recipes retry.
        existed = []

        def delete():
            try:
                if not existed:
                    existed.append(self.zk.exists(token) is not None)
                if existed[0]:
                    grant[1].release()
                return existed[0]
            except SessionExpiredError:
                return False  # ZooKeeper deleted the session's znodes with it

        deleted = call(KazooRetry(max_tries=-1, delay=0.05, max_delay=0.2, deadline=self.timeout), delete)
        with self.held:
            self.grants.pop(token, None)
        return {"deleted": deleted}

    def inspect(self, req):
        path = ROOT + req["key"]
        nodes = sorted(call(self.zk.get_children, path) if self.zk.exists(path) else [], key=lambda n: n[-10:])
        if not nodes:
            return {"state": "free"}
        return {"state": "held by %s/%s (%d znodes waiting behind it)" % (path, nodes[0], len(nodes) - 1)}


def call(fn, *args, **kwargs):
    """Runs a kazoo call, turning its errors into the protocol's: all of them
    leave the outcome unknown (a create may have landed before the
    connection dropped)."""
    try:
        return fn(*args, **kwargs)
    except (LockTimeout, OperationTimeoutError, KazooTimeoutError, RetryFailedError) as e:
        raise Error(lockproto.TIMEOUT, repr(e))
    except (ConnectionLoss, SessionExpiredError) as e:
        raise Error(lockproto.CRASH, repr(e))


if __name__ == "__main__":
    Kazoo().run()
