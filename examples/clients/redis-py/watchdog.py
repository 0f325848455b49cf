#!/usr/bin/python3
"""redis-py's Lock with a watchdog thread, the Redisson pattern, as a lockcheck client.

Everything of plain.py, and for every grant a thread in the same process that
extends the lease every TTL/3 (Lock.reacquire) until the grant is released. It
sends renewed after each extend that succeeded, with the time it sent that
extend (sent_ns), and lost when an extend finds the key no longer its own. The failpoint before-renew stops the watchdog right
before each renewal, so a scenario can freeze it there as a GC pause would.
"""

import threading
import time

from plain import RedisPy, call  # first: it puts lockproto on the path

from lockproto import Error, log
from redis.exceptions import LockNotOwnedError

BEFORE_RENEW = "before-renew"


class Watchdog(RedisPy):
    library = "redis-py+watchdog"
    failpoints = [BEFORE_RENEW]

    def init(self, req):
        super().init(req)
        self.watchdogs = {}  # token -> its watchdog

    def granted(self, key, token, lock):
        dog = Dog(key, token)
        self.watchdogs[token] = dog
        threading.Thread(target=self.watch, args=(dog, lock), daemon=True).start()

    def watch(self, dog, lock):
        while not dog.stopped.wait(self.ttl_ms / 3000):
            self.failpoint(BEFORE_RENEW)
            # A renewal and its message happen whole before a release or not
            # at all, so that no renewed or lost follows a release_ok.
            with dog.turn:
                if dog.stopped.is_set():
                    return
                # When the renewal left (CLOCK_MONOTONIC, lockcheck's clock):
                # the service renewed the lease no earlier.
                sent_ns = time.monotonic_ns()
                try:
                    call(lock.reacquire)
                except LockNotOwnedError:
                    self.send({"type": "lost", "key": dog.key, "token": dog.token,
                               "why": "renewal failed: the key is no longer this token's"})
                    return
                except Error as e:
                    # A renewal whose outcome is unknown proves nothing: try again.
                    log("renewal of %s: %s" % (dog.key, e.text))
                    continue
                self.send({"type": "renewed", "key": dog.key, "token": dog.token, "ttl_ms": self.ttl_ms,
                           "sent_ns": sent_ns})

    def release(self, req):
        dog = self.watchdogs.pop(req["token"], None)
        if dog:
            with dog.turn:
                dog.stopped.set()
        return super().release(req)


class Dog:
    """The watchdog of one grant."""

    def __init__(self, key, token):
        self.key, self.token = key, token
        self.stopped = threading.Event()
        self.turn = threading.Lock()


if __name__ == "__main__":
    Watchdog().run()
