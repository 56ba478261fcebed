"""Deadlines for a blocking psycopg connection.

A paused PostgreSQL server never answers, and the kernel keeps ACKing on
loopback, so a plain statement blocks forever. psycopg's own cancel goes
through the (frozen) postmaster and stalls ~11 s (fault-tooling notes §4).
What works: shut the client socket down from another thread. The blocked
call then fails at once with a connection error, and the caller treats the
operation as indeterminate.

``Watchdog`` is one long-lived daemon thread per store: ``arm(conn, seconds)``
before an operation, ``disarm()`` after; if the deadline passes first it runs
``shutdown(SHUT_RDWR)`` on a dup of the connection's socket and sets ``fired``.
"""

from __future__ import annotations

import os
import socket
import threading
import time


def cut_socket(conn) -> None:
    """Shut the connection's socket down (both directions) without closing
    psycopg's file descriptor: any blocked or later I/O on it fails at once."""
    try:
        fd = os.dup(conn.fileno())
    except Exception:
        return
    s = socket.socket(fileno=fd)
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


class Watchdog:
    """Cut a connection's socket when an armed deadline passes."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._conn = None
        self._due: float | None = None
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="pg-deadline-watchdog", daemon=True)
        self._closed = False
        self._thread.start()

    def arm(self, conn, seconds: float) -> None:
        with self._cv:
            self._conn = conn
            self._due = time.monotonic() + seconds
            self.fired = False
            self._cv.notify()

    def disarm(self) -> bool:
        """Stop watching; returns True when the deadline had already fired."""
        with self._cv:
            self._conn = None
            self._due = None
            return self.fired

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while not self._closed:
                if self._due is None:
                    self._cv.wait()
                    continue
                left = self._due - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                # Due and still armed: disarm() takes this lock, so an
                # operation that finished in time is never cut.
                self.fired = True
                cut_socket(self._conn)
                self._due = None
