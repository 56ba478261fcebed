"""Map psycopg failures onto the typed store errors of ``backends.api``.

The one rule that matters: once ``COMMIT`` may have reached the server, a
connection error, an I/O error (a PANIC on a failed WAL fsync) or a deadline
means *unknown*, never a definite result. Before ``COMMIT`` is sent, a dead
connection proves nothing committed (the server aborts the transaction of a
lost session), so the store reports ``StoreUnavailable``.
"""

from __future__ import annotations

import psycopg

# SQLSTATE classes / codes meaning "the session or the server went away".
_CONNECTION_CLASSES = ("08", "57")  # connection exception, operator intervention
IO_ERROR = "58030"                  # io_error: e.g. "could not fdatasync file" -> PANIC
CANNOT_CONNECT_NOW = "57P03"        # starting up / in recovery / shutting down


def sqlstate(e: BaseException) -> str | None:
    return getattr(e, "sqlstate", None)


def is_connection_error(e: BaseException) -> bool:
    """True when the error says the session is gone or unusable (no sqlstate
    means libpq itself failed: EOF, reset, timeout)."""
    if not isinstance(e, psycopg.Error):
        return isinstance(e, OSError)
    code = sqlstate(e)
    if code is None:
        return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError))
    return code.startswith(_CONNECTION_CLASSES) or code == IO_ERROR


def connect_failure_reason(e: BaseException) -> str:
    """A short ``details.reason`` for a failed connect."""
    text = str(e).lower()
    if sqlstate(e) == CANNOT_CONNECT_NOW or "recovery mode" in text or "starting up" in text:
        return "server-recovering"
    if "shutting down" in text:
        return "server-shutting-down"
    if "timeout" in text or "timed out" in text:
        return "connect-timeout"
    return "server-unreachable"


def statement_failure_reason(e: BaseException, deadline_fired: bool) -> str:
    if deadline_fired:
        return "deadline-exceeded"
    code = sqlstate(e)
    if code == IO_ERROR:
        return "server-io-error"
    if is_connection_error(e):
        return "connection-lost"
    return f"statement-failed-{code or 'unknown'}"
