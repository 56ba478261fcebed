"""One home for the suite's own errors and its documented exit codes.

Exit codes (design.md): 0 valid, 1 invalid, 2 unknown, 254 bad arguments or
config, 255 the suite itself crashed. A test matrix exits with the worst.
"""

from __future__ import annotations

import contextlib
import signal
from enum import IntEnum


class ExitCode(IntEnum):
    VALID = 0
    INVALID = 1
    UNKNOWN = 2
    USAGE = 254
    CRASH = 255


def worst(codes) -> ExitCode:
    """The worst of several run results: crash > usage > invalid > unknown > valid."""
    order = [ExitCode.VALID, ExitCode.UNKNOWN, ExitCode.INVALID, ExitCode.USAGE, ExitCode.CRASH]
    rank = {c: i for i, c in enumerate(order)}
    out = ExitCode.VALID
    for c in codes:
        c = ExitCode(c)
        if rank[c] > rank[out]:
            out = c
    return out


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """SIGTERM stops a command as Ctrl-C does (its ``finally`` blocks run: children stopped, temp
    dirs removed, exit 130), not mid-write with its processes and files left behind."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals are not ours to take
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class ChaosError(Exception):
    """Base of every error the suite raises on purpose."""


class UsageError(ChaosError):
    """Bad input (arguments, config, manifests, scenario files). The CLI prints
    the message on one line and exits 254; never a traceback."""


class SetupFailed(ChaosError):
    """A backend, server or fault mechanism could not be set up."""


class Indeterminate(ChaosError):
    """An operation ended without a reply that proves anything (crash,
    timeout, lost reply). Recorded as ``info``."""


class ReplyProtocolViolation(Indeterminate):
    """The backend process exited on its own without a contract reply (a
    non-contract exit code, or stdout not exactly one JSON object + LF). Still
    indeterminate for the state; ``evidence`` (op, argv, exit, stdout and
    stderr excerpts) goes into the history as the op's ``protocol`` member and
    becomes a ``reply-protocol`` finding."""

    def __init__(self, message: str, evidence: dict):
        super().__init__(message)
        self.evidence = evidence


class ReplyLostIndeterminate(Indeterminate):
    """The operation committed but its reply was deliberately dropped (a
    response-loss fault). Still indeterminate to the caller."""

