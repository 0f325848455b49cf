#!/usr/bin/python3
"""redis-py's redis.lock.Lock as a lockcheck client (protocol v1, docs/clients.md).

acquire is Lock.acquire(blocking=False): SET key token NX PX ttl, refused with
code 40 when another holds the key; release is Lock.release() (a Lua
compare-and-delete: LockNotOwnedError is deleted false); extend is
Lock.reacquire() (a full TTL from now). redis-py hands out no fence.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import redis  # noqa: E402
import redis.lock  # noqa: E402
import redis.sentinel  # noqa: E402
from redis.exceptions import ConnectionError, LockNotOwnedError, ReadOnlyError, ResponseError, TimeoutError  # noqa: E402

import lockproto  # noqa: E402
from lockproto import Error  # noqa: E402


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class RedisPy(lockproto.Client):
    library = "redis-py"
    version = redis.__version__
    supports = {"extend": True, "inspect": True, "fence": False}

    def init(self, req):
        self.ttl_ms = req["ttl_ms"]
        timeout = req["timeout_ms"] / 1000
        # No retries: a command sent twice could take the lock the first time
        # and be refused the second.
        opts = dict(socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False)
        addrs = [hostport(a) for a in req["addrs"]]
        if req.get("topology") == "sentinel":
            # lockcheck names its master "lockcheck" (--addr: the sentinels of a
            # service whose master has that name, or say it in settings).
            master = (req.get("settings") or {}).get("sentinel_master", "lockcheck")
            self.redis = redis.sentinel.Sentinel(addrs, sentinel_kwargs=opts, **opts).master_for(master)
        elif len(addrs) == 1:
            self.redis = redis.Redis(*addrs[0], **opts)
        else:
            raise Error(lockproto.NOT_SUPPORTED, "redis-py's Lock runs on one Redis or on Sentinel, not on %d addresses" % len(addrs))
        self.grants = {}  # token -> the Lock that holds it

    def lock(self, key, token=None):
        lock = redis.lock.Lock(self.redis, key, timeout=self.ttl_ms / 1000, thread_local=False)
        if token is not None:
            lock.local.token = token.encode()
        return lock

    def acquire(self, req):
        lock = self.lock(req["key"])
        if not call(lock.acquire, blocking=False):
            raise Error(lockproto.LOCK_HELD, "held by another client")
        token = lock.local.token.decode()
        self.grants[token] = lock
        self.granted(req["key"], token, lock)
        return {"token": token, "ttl_ms": self.ttl_ms}

    def granted(self, key, token, lock):
        """Called after every grant (the watchdog starts here)."""

    def release(self, req):
        lock = self.grants.pop(req["token"], None) or self.lock(req["key"], req["token"])
        try:
            call(lock.release)
        except LockNotOwnedError:
            return {"deleted": False}
        return {"deleted": True}

    def extend(self, req):
        lock = self.grants.get(req["token"]) or self.lock(req["key"], req["token"])
        try:
            call(lock.reacquire)
        except LockNotOwnedError:
            return {"extended": False}
        return {"extended": True, "ttl_ms": self.ttl_ms}

    def inspect(self, req):
        key = req["key"]
        pipe = self.redis.pipeline(transaction=False)
        holder, pttl = call(pipe.get(key).pttl(key).execute)
        if pttl == -2:
            return {"state": key + " is free"}
        if pttl == -1:
            return {"state": "held by %s with no TTL: it never expires" % holder.decode()}
        return {"state": "held by %s, %d ms left" % (holder.decode(), pttl)}


def call(fn, *args, **kwargs):
    """Runs a redis-py call, turning its errors into the protocol's: a
    connection never made (nothing was sent) or a write the server refused
    certainly did nothing; a timeout or a connection lost after sending leaves
    the outcome unknown."""
    try:
        return fn(*args, **kwargs)
    except LockNotOwnedError:
        raise
    except TimeoutError as e:
        raise Error(lockproto.TIMEOUT, str(e))
    except ConnectionError as e:
        if "connecting to" in str(e):
            raise Error(lockproto.NOT_SENT, str(e))
        raise Error(lockproto.CRASH, str(e))
    except ReadOnlyError as e:
        raise Error(lockproto.TEMPORARILY_UNAVAILABLE, "READONLY " + str(e))
    except ResponseError as e:
        if str(e).startswith("NOREPLICAS"):
            raise Error(lockproto.TEMPORARILY_UNAVAILABLE, str(e))
        raise


if __name__ == "__main__":
    RedisPy().run()
