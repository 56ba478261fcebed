"""Run one invocation of an external contract CLI and read its one reply.

Each invocation runs in its own session (so its own process group); whatever
it forked into that group is killed when the call ends, and a caller that
kills the invoking process tree kills the group too: a program cannot leave
processes behind (``chaos.worker.Slot.kill`` relies on this; a child that
leaves the group with ``setsid`` is found by the caller's subreaper).

What a program prints is bounded: at most ``MAX_STDOUT`` bytes of stdout (a
contract reply is one JSON object; the largest a request can lead to is a few
times the 11 MiB request limit) and ``MAX_STDERR`` of stderr are read; a
program that prints more is killed with its group at once and the call is
``Indeterminate`` (``info``), so its output never grows the harness's memory.

What a program writes is bounded too: given ``write_roots``, the child is
confined with Landlock before it execs (``backends.external.confine``) and
may write only beneath those directories (and ``/dev/null``); a write
elsewhere fails with ``EACCES`` inside the program.
"""

from __future__ import annotations

import os
import signal
import subprocess

from backends.contract import loads_reply_line
from backends.external import confine

#: the exit codes of the contract (0, and 2-6); anything else is a protocol violation
CONTRACT_EXITS = frozenset({0, 2, 3, 4, 5, 6})
EXCERPT = 400
MAX_STDOUT = 64 << 20
MAX_STDERR = 1 << 20
_CHUNK = 1 << 16


class Indeterminate(Exception):
    """The invocation proves nothing: the program crashed (killed by a
    signal), timed out, or did not print exactly one JSON object + LF. The
    harness records the operation as ``info`` (like ``chaos.errors.
    Indeterminate``; ``backends`` cannot import ``chaos``)."""


class ReplyProtocolError(Indeterminate):
    """The program exited on its own, but not as the contract says: a
    non-contract exit code, or stdout that is not exactly one JSON object and
    LF. Its state effect stays indeterminate; ``evidence`` names the call, the
    exit and excerpts of stdout and stderr (checkers report it as a
    ``reply-protocol`` finding)."""

    def __init__(self, message: str, evidence: dict):
        super().__init__(message)
        self.evidence = evidence


def _excerpt(raw: bytes, tail: bool = False) -> str:
    """At most ``EXCERPT`` characters: the head of stdout, the tail of stderr
    (where a traceback or an error message ends)."""
    text = raw.decode(errors="replace")
    if len(text) <= EXCERPT:
        return text
    return f"({len(raw)} bytes) ..." + text[-EXCERPT:] if tail else text[:EXCERPT] + f"... ({len(raw)} bytes)"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)   # our own session: only what this call started
    except (ProcessLookupError, PermissionError):
        pass


class _Bounded:
    """What one stream printed, up to ``limit`` bytes; past it, ``over`` is set
    and the program's group is killed (the reader stops reading)."""

    def __init__(self, stream, limit: int, pgid: int):
        self.stream, self.limit, self.pgid = stream, limit, pgid
        self.buf = bytearray()   # one growing buffer: a chunk list's per-read allocations cost up to 10x the bound
        self.over = False

    def drain(self) -> None:
        chunk = bytearray(_CHUNK)
        view = memoryview(chunk)
        while True:
            try:
                n = self.stream.readinto1(chunk)
            except (OSError, ValueError):
                return
            if not n:
                return
            if len(self.buf) + n > self.limit:
                self.buf += view[:self.limit - len(self.buf)]
                self.over = True
                _kill_group(self.pgid)
                return
            self.buf += view[:n]

    @property
    def size(self) -> int:
        return len(self.buf)

    def data(self) -> bytes:
        return bytes(self.buf)


def _pump(proc, stdin: bytes, max_stdout: int, max_stderr: int) -> tuple[_Bounded, _Bounded, list]:
    """Feed stdin and drain stdout/stderr in threads (so neither side can block
    the other), each within its bound; returns the two readers and the threads."""
    import threading

    out = _Bounded(proc.stdout, max_stdout, proc.pid)
    err = _Bounded(proc.stderr, max_stderr, proc.pid)

    def feed() -> None:
        try:
            proc.stdin.write(stdin)
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    threads = [threading.Thread(target=feed, daemon=True),
               threading.Thread(target=out.drain, daemon=True),
               threading.Thread(target=err.drain, daemon=True)]
    for t in threads:
        t.start()
    return out, err, threads


def run_cli(argv: list[str], stdin: bytes, env: dict, timeout_s: float, op: str = "",
            max_stdout: int = MAX_STDOUT, max_stderr: int = MAX_STDERR,
            write_roots: tuple[str, ...] = (), cwd: str | None = None) -> tuple[int, dict]:
    """``(exit, envelope)`` of one invocation (in ``cwd``, else this process's); raises ``Indeterminate``.

    The call is over when the program exits: then its process group is killed
    (a child it left running, even one holding our pipes, cannot keep the call
    open or outlive it) and the output read so far is its reply. Printing more
    than ``max_stdout`` / ``max_stderr`` bytes ends the call at once (the module
    docstring). With ``write_roots``, the program writes only beneath them
    where Landlock is available (``confine.status()`` says where it is not)."""
    ruleset = confine.ruleset(write_roots) if write_roots else None
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env}, start_new_session=True, cwd=cwd,
                            preexec_fn=None if ruleset is None else confine.restrict_in_child(ruleset))
    out_buf, err_buf, threads = _pump(proc, stdin, max_stdout, max_stderr)
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc.pid)  # anything the call forked and left running in its group
        proc.wait()
        for t in threads:
            t.join(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    for name, stream in (("stdout", out_buf), ("stderr", err_buf)):
        if stream.over:
            raise Indeterminate(f"printed more than {stream.limit} bytes on {name} (killed with its process "
                                f"group; a reply is one JSON object): {' '.join(argv)}")
    if timed_out:
        raise Indeterminate(f"timed out after {timeout_s} s: {' '.join(argv)}")
    return judge_call(proc.returncode, out_buf.data(), err_buf.data(), op, argv)


def judge_call(returncode: int, out: bytes, err: bytes, op: str, argv: list[str]) -> tuple[int, dict]:
    """What a finished call answered: ``(exit, envelope)``, or ``Indeterminate`` (killed by a
    signal), or ``ReplyProtocolError`` (not one JSON object + LF, not a contract exit code)."""
    if returncode < 0:
        raise Indeterminate(f"killed by signal {-returncode}: {' '.join(argv)}")
    evidence = {"op": op, "argv": argv, "exit": returncode, "stdout": _excerpt(out),
                "stderr": _excerpt(err, tail=True)}
    try:
        envelope = loads_reply_line(out)
    except ValueError as e:
        raise ReplyProtocolError(f"exit {returncode}, stdout is not one JSON object + LF ({e}); "
                                 f"stderr: {_excerpt(err, tail=True)[-200:]!r}", dict(evidence, problem=str(e))) from None
    if returncode not in CONTRACT_EXITS:
        raise ReplyProtocolError(f"exit {returncode} is not a contract exit code",
                                 dict(evidence, problem=f"exit {returncode} is not a contract exit code"))
    return returncode, envelope


def parse_reply(out: bytes, err: bytes = b"") -> dict:
    """Exactly one strict JSON object followed by one LF; anything else proves
    nothing about the operation (indeterminate)."""
    try:
        return loads_reply_line(out)
    except ValueError as e:
        raise Indeterminate(f"{e} (stderr: {err.decode(errors='replace')[-300:]!r})") from None
