"""Run one invocation of an external contract CLI and read its one reply."""

from __future__ import annotations

import os
import signal
import subprocess

from backends.contract import loads_reply_line


class Indeterminate(Exception):
    """The invocation proves nothing: the program crashed (killed by a
    signal), timed out, or did not print exactly one JSON object + LF. The
    harness records the operation as ``info`` (like ``chaos.errors.
    Indeterminate``; ``backends`` cannot import ``chaos``)."""


def run_cli(argv: list[str], stdin: bytes, env: dict, timeout_s: float) -> tuple[int, dict]:
    """``(exit, envelope)`` of one invocation; raises ``Indeterminate``."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env}, start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own session: only what we started
        proc.communicate()
        raise Indeterminate(f"timed out after {timeout_s} s: {' '.join(argv)}") from None
    if proc.returncode < 0:
        raise Indeterminate(f"killed by signal {-proc.returncode}: {' '.join(argv)}")
    return proc.returncode, parse_reply(out, err)


def parse_reply(out: bytes, err: bytes = b"") -> dict:
    """Exactly one strict JSON object followed by one LF; anything else proves
    nothing about the operation (indeterminate)."""
    try:
        return loads_reply_line(out)
    except ValueError as e:
        raise Indeterminate(f"{e} (stderr: {err.decode(errors='replace')[-300:]!r})") from None
