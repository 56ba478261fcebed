"""Host a black-box program's per-call processes in a deterministic worker.

``backends.external.process.run_cli`` feeds and drains the program in three
threads, which the scheduler would not serialize between their points (and a
thread's first clock read, with Python's GIL held, would wait for a grant
while the thread granted waits for the GIL). ``HostedExternalBackend`` is the
same backend with one difference: its ``run`` is ``run_cli`` below, the same
call in one thread — the same environment, confinement, output bounds,
timeout, group kill and errors — whose one wait is a ``poll`` over the
program's pipes and a pidfd of the program, a wait the shim turns into a
scheduler stop (retried after another slice got somewhere, never blocking).
The program runs under the shim as the worker's child ``w<n>.<k>/f<N>``; its
timeout (the profile's ``timeout_s``) is virtual, as every clock here. Every program runs with
``shim.THREADS_ENV``: every thread controlled (a Python program's threads, Node's libuv pool and V8's
helpers); a Node program (Wowbagger) with ``shim.THREADED_ENV``: its getpid() a virtual pid, the same in
every run, and its start a flight. A call the worker pins at an instant (an op's ``clock_ms``, on the
worker's ``FixedClock``) runs its program with ``$CHAOS_SCHED_WALL_MS``: the shim freezes its wall
clocks there, as the timed mode's libfaketime pin does. ``HostedExternalLockBackend`` is the issue-lock
protocol's program (``backends.issuelock.external``) hosted the same way.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import tempfile

from backends.external import ExternalBackend, confine
from backends.external.process import MAX_STDERR, MAX_STDOUT, Indeterminate, _kill_group, judge_call
from backends.issuelock.external import ExternalLockBackend
from chaos.deterministic.shim import THREADED_ENV, THREADS_ENV

_CHUNK = 1 << 16


class HostedExternalBackend(ExternalBackend):
    """``ExternalBackend`` whose per-call program is run by ``run_cli`` (one thread)."""

    def __init__(self, spec: dict, clock=None, hooks=None):
        super().__init__(spec, clock, hooks)
        self.pin = clock   # the worker's FixedClock: its ms, when set, is the instant this call is decided at

    def run(self, argv: list[str], stdin: bytes, op: str) -> tuple[int, dict]:
        os.makedirs(self.tmpdir, exist_ok=True)
        return run_cli(argv, stdin, {"TMPDIR": self.tmpdir, **self.env, **program_env(argv, self.pin)},
                       self.profile.timeout_s, op, write_roots=self.write_roots, cwd=self.cwd)


class HostedExternalLockBackend(ExternalLockBackend):
    """The issue-lock protocol's ``ExternalLockBackend`` whose per-call program is run by ``run_cli`` (one
    thread), with the same environment as a claims program's (``HostedExternalBackend.run``)."""

    def __init__(self, spec: dict, clock=None):
        super().__init__(spec)
        self.pin = clock

    def _run(self, argv: list, stdin: bytes) -> tuple[int, dict]:
        os.makedirs(self.tmpdir, exist_ok=True)
        op = argv[len(self.prefix)] if len(argv) > len(self.prefix) else ""
        return run_cli(argv, stdin, {"TMPDIR": self.tmpdir, **self.env, **program_env(argv, self.pin)},
                       self.profile.timeout_s, op, write_roots=self.write_roots)


def program_env(argv: list[str], pin) -> dict:
    """What a hosted program runs with beside its backend's own environment: its threads controlled (a Node
    program's pids virtual too), and its wall clocks frozen at the worker's pinned instant, if one is set."""
    pinned = getattr(pin, "ms", None)
    return {**(THREADED_ENV if is_node(argv) else THREADS_ENV),
            **({} if pinned is None else {"CHAOS_SCHED_WALL_MS": str(int(pinned))})}


def is_node(argv: list[str]) -> bool:
    """A Node program: its pids virtual (``shim.THREADED_ENV``)."""
    return bool(argv) and os.path.basename(argv[0]) in ("node", "nodejs")


def open_backend(spec: dict, clock=None, hooks=None) -> HostedExternalBackend | HostedExternalLockBackend:
    """The hosted backend of ``spec``'s protocol (work-claim, or issue-lock)."""
    if spec.get("protocol") == "issue-lock":
        return HostedExternalLockBackend(spec, clock)
    return HostedExternalBackend(spec, clock, hooks)


def run_cli(argv: list[str], stdin: bytes, env: dict, timeout_s: float, op: str = "",
            max_stdout: int = MAX_STDOUT, max_stderr: int = MAX_STDERR,
            write_roots: tuple[str, ...] = (), cwd: str | None = None) -> tuple[int, dict]:
    """``backends.external.process.run_cli`` in one thread: ``(exit, envelope)``; raises ``Indeterminate``."""
    import time

    ruleset = confine.ruleset(write_roots) if write_roots else None
    feed = _filled_stdin(stdin)
    try:
        proc = subprocess.Popen(argv, stdin=feed, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, **env}, start_new_session=True, cwd=cwd,
                                preexec_fn=None if ruleset is None else confine.restrict_in_child(ruleset))
    finally:
        os.close(feed)
    pidfd = os.pidfd_open(proc.pid)
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    streams = {out_fd: ("stdout", bytearray(), max_stdout), err_fd: ("stderr", bytearray(), max_stderr)}
    over, timed_out = None, False
    for fd in streams:
        os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    for fd in streams:
        poller.register(fd, select.POLLIN)
    try:
        exited = False
        while not exited and over is None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for fd, _ in poller.poll(max(1, int(left * 1000))):
                if fd == pidfd:
                    exited = True
                elif fd in streams and not _drain(fd, streams, poller):
                    over = streams[fd]
    finally:
        _kill_group(proc.pid)   # anything the call forked and left running in its group
        proc.wait()
        os.close(pidfd)
        for fd in list(streams):
            if over is None and not _drain(fd, streams, None):
                over = streams[fd]
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    if over is not None:
        raise Indeterminate(f"printed more than {over[2]} bytes on {over[0]} (killed with its process group; "
                            f"a reply is one JSON object): {' '.join(argv)}")
    if timed_out:
        raise Indeterminate(f"timed out after {timeout_s} s: {' '.join(argv)}")
    return judge_call(proc.returncode, bytes(streams[out_fd][1]), bytes(streams[err_fd][1]), op, argv)


def _filled_stdin(data: bytes) -> int:
    """The read end of a pipe that already holds all of ``data`` and its end (or of an unlinked file, for
    more than a pipe can hold): what the program reads is there before it starts, so its start depends on
    nothing this host does later (the scheduler runs that start beside the schedule: "flights")."""
    r, w = os.pipe()
    try:
        if len(data) > 65536:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, len(data))
        if data and os.write(w, data) != len(data):   # a blocking pipe with room takes it all: else a file
            raise OSError("short write to the stdin pipe")
        os.close(w)
        return r
    except OSError:   # more than the pipe limit (/proc/sys/fs/pipe-max-size): a file
        os.close(r)
        try:
            os.close(w)
        except OSError:
            pass
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.flush()
            f.seek(0)
            return os.dup(f.fileno())


def _drain(fd: int, streams: dict, poller) -> bool:
    """Read what ``fd`` has now (it never blocks); False when the stream went over its bound."""
    name, buf, limit = streams[fd]
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if not chunk:
            if poller is not None:
                poller.unregister(fd)
            return True
        if len(buf) + len(chunk) > limit:
            buf += chunk[:limit - len(buf)]
            return False
        buf += chunk
