#!/usr/bin/python3
"""PostgreSQL session-level advisory locks through psycopg2 as a lockcheck
client (protocol v1).

acquire is SELECT pg_try_advisory_lock(id) on the client's one connection,
in autocommit, as applications take a session lock: id is the key's 64-bit
FNV-1a hash, the same id lockcheck's own PostgreSQL client uses, so that
lockcheck's inspection finds the lock. release is pg_advisory_unlock(id),
whose result says whether the session still held it. The lock lives as long
as the server session that took it: acquire_ok carries no ttl_ms (a lease
that lasts until release, which the postgres topology allows).

The fence is nextval of the sequence lockcheck_lock_fence (which lockcheck
creates on the primary), drawn right after the grant on the same
connection: it rises with every grant.

Behind PgBouncer (settings.pooler) in transaction pooling, every statement
of an autocommit connection may run on another server connection: the lock
stays on whichever server session ran pg_try_advisory_lock, the release may
run on another one (and return false), and another client whose statement
lands on the holder's server session is granted the same lock again, since
an advisory lock is re-entrant within its session. That is the deployment
this client exists to show; in session pooling a client keeps its server
connection while it is connected, and the lock is safe.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import psycopg2  # noqa: E402
import psycopg2.errors  # noqa: E402

import lockproto  # noqa: E402
from lockproto import Error  # noqa: E402

USER = "lockcheck"
DATABASE = "postgres"
FENCE_SEQUENCE = "lockcheck_lock_fence"
# The first connection, in init, may take seconds on a busy machine
# (lockcheck waits for init before the run's time starts); a reconnection
# during the run must answer within timeout_ms.
CONNECT_TIMEOUT = 5


def key_id(key):
    """The key's 64-bit FNV-1a hash as a signed bigint, as lockcheck's own
    client (backends/postgres KeyID) computes it."""
    h = 0xCBF29CE484222325
    for b in key.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


class Psycopg2(lockproto.Client):
    library = "psycopg2"
    version = psycopg2.__version__.split()[0]
    supports = {"extend": False, "inspect": True, "fence": True}

    def init(self, req):
        host, port = req["addrs"][0].rsplit(":", 1)
        self.conninfo = {
            "host": host, "port": int(port), "user": USER, "dbname": DATABASE,
            "connect_timeout": max(1, int(req["timeout_ms"] / 1000)),
            "application_name": "lockcheck-%s" % req["client"],
        }
        if not req.get("settings", {}).get("pooler"):
            # A statement that hangs is cancelled by the server before
            # lockcheck gives up on the reply. PgBouncer refuses startup
            # options, so behind it the library has no timeout of its own.
            self.conninfo["options"] = "-c statement_timeout=%d" % int(req["timeout_ms"] * 0.8)
        self.fenced = True
        self.grants = 0
        self.slot = "%s:%s" % (req["client"], req["process"])
        self.conn = None
        self.connect(CONNECT_TIMEOUT)

    def connect(self, timeout=None):
        try:
            self.conn = psycopg2.connect(**dict(self.conninfo, connect_timeout=timeout or self.conninfo["connect_timeout"]))
        except psycopg2.OperationalError as e:
            self.conn = None
            raise Error(lockproto.TEMPORARILY_UNAVAILABLE, "connect: %s" % str(e).strip())
        self.conn.autocommit = True

    def query(self, sql, *args):
        """Runs one statement and returns its first row. A connection that
        broke on the way leaves the outcome unknown (the statement may have
        run): the connection is dropped, and the next request connects
        again, to a new session, which holds none of the old one's locks."""
        if self.conn is None:
            self.connect()
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()
        except psycopg2.errors.QueryCanceled as e:
            raise Error(lockproto.TIMEOUT, str(e).strip())
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
            self.conn = None
            raise Error(lockproto.CRASH, str(e).strip())

    def acquire(self, req):
        got, pid = self.query("SELECT pg_try_advisory_lock(%s), pg_backend_pid()", key_id(req["key"]))
        if not got:
            raise Error(lockproto.LOCK_HELD, "held by another session")
        self.grants += 1
        reply = {"token": "%s:%d:pid-%d" % (self.slot, self.grants, pid)}
        (reply["fence"],) = self.query("SELECT nextval('%s')" % FENCE_SEQUENCE)
        return reply

    def release(self, req):
        (deleted,) = self.query("SELECT pg_advisory_unlock(%s)", key_id(req["key"]))
        return {"deleted": bool(deleted)}

    def inspect(self, req):
        i = key_id(req["key"]) & 0xFFFFFFFFFFFFFFFF
        row = self.query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND objsubid = 1 AND granted",
            i >> 32, i & 0xFFFFFFFF)
        if row is None:
            return {"state": "free"}
        return {"state": "held by backend pid %d" % row[0]}


if __name__ == "__main__":
    Psycopg2().run()
