"""``HostClient``: start one host process (``chaos.host.server``), demultiplex
its replies by ``id`` in a reader thread, and guarantee the process never
outlives the client.
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from backends.contract.records import Reply

log = logging.getLogger("chaos.host.client")

_LIVE: "weakref.WeakSet[HostClient]" = weakref.WeakSet()
_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def live_clients() -> list["HostClient"]:
    """Every host this process started and has not reaped, those still starting included."""
    return list(_LIVE)


def _kill_leftovers() -> None:
    """Last resort at interpreter exit: SIGKILL every host this process started."""
    for client in list(_LIVE):
        client.kill()


atexit.register(_kill_leftovers)


class HostClient:
    """Start one host process and talk to it.

    ``env`` is added to a copy of this process's environment (e.g.
    ``LD_PRELOAD``, ``FAILSYNC_FILE``); ``log_path`` receives the host's stderr
    (appended). ``call`` raises ``chaos.errors.Indeterminate`` whenever the
    reply proves nothing: timeout, crash/EOF, lost reply, host-side error.
    """

    def __init__(self, spec: dict, env: dict | None = None, log_path: str | None = None,
                 python: str = sys.executable, ready_timeout: float = 30.0, launcher: list[str] | None = None):
        from chaos.errors import SetupFailed
        from chaos.faults import procs

        self.spec = spec
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, full_env.get("PYTHONPATH")) if p)
        full_env.update(env or {})
        full_env["CHAOS_HOST_SPEC"] = json.dumps(spec)  # not argv: a DSN password must not show in `ps`
        self._log = open(log_path, "ab") if log_path else None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._barriers: dict[str, threading.Event] = {}
        self._ready = threading.Event()
        self._dead_reason: str | None = None
        self.last_wall_ms: int | None = None  # the worker's wall clock at its latest call reply
        self.proc = subprocess.Popen(
            # launcher: an argv prefix that runs the host elsewhere (chaos.nodes.relay: in a container)
            [*(launcher or [python]), "-m", "chaos.host", "--spec-env", "CHAOS_HOST_SPEC"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            env=full_env, start_new_session=True,
        )
        self.pid = procs.register(self.proc.pid)
        _LIVE.add(self)
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"hostclient-{self.pid}")
        self._reader.start()
        if not self._ready.wait(ready_timeout) or self._dead_reason is not None:
            self.kill()
            raise SetupFailed(f"host for {spec.get('backend')!r} did not become ready: "
                              f"{self._dead_reason or 'timeout'} (log: {log_path or 'stderr'})")

    # ------------------------------------------------------------------ plumbing

    def _read(self) -> None:
        for raw in self.proc.stdout:  # type: ignore[union-attr]
            try:
                msg = json.loads(raw)
            except ValueError:
                log.warning("host %d wrote a non-JSON line: %r", self.pid, raw[:200])
                continue
            if msg.get("event") == "ready":
                self._ready.set()
            elif msg.get("event") == "barrier":
                self._barrier(msg["operation_id"]).set()
            elif "id" in msg:
                with self._lock:
                    fut = self._pending.pop(msg["id"], None)
                if fut is not None:
                    fut.set_result(msg)
        rc = self.proc.wait()
        self._dead_reason = f"host process {self.pid} exited with status {rc}"
        self._ready.set()
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for fut in pending:
            fut.set_result({"error": self._dead_reason, "dead": True})

    def _barrier(self, operation_id: str) -> threading.Event:
        with self._lock:
            return self._barriers.setdefault(operation_id, threading.Event())

    def _send(self, cmd: str, **members: Any) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            mid = next(self._ids)
            if self._dead_reason is not None:
                fut.set_result({"error": self._dead_reason, "dead": True})
                return fut
            self._pending[mid] = fut
            line = json.dumps({"cmd": cmd, "id": mid, **members}, separators=(",", ":")).encode() + b"\n"
            try:
                self.proc.stdin.write(line)  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, ValueError, OSError) as e:
                self._pending.pop(mid, None)
                fut.set_result({"error": f"host stdin closed: {e}", "dead": True})
        return fut

    def _control(self, cmd: str, timeout: float = 30.0, **members: Any) -> dict:
        from chaos.errors import ChaosError

        msg = self._wait(self._send(cmd, **members), timeout, cmd)
        if "error" in msg:
            raise ChaosError(f"host {cmd} failed: {msg['error']}")
        return msg

    @staticmethod
    def _wait(fut: concurrent.futures.Future, timeout: float, what: str) -> dict:
        from chaos.errors import Indeterminate

        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise Indeterminate(f"{what}: no reply within {timeout} s") from None

    @staticmethod
    def _to_reply(msg: dict) -> Reply:
        from chaos.errors import Indeterminate, ReplyLostIndeterminate

        if "exit" in msg and "envelope" in msg:
            return Reply(msg["exit"], msg["envelope"])
        if msg.get("lost"):
            raise ReplyLostIndeterminate(f"reply lost: {msg.get('error', msg)}")
        if isinstance(msg.get("protocol"), dict):
            from chaos.errors import ReplyProtocolViolation

            raise ReplyProtocolViolation(f"reply protocol violated: {msg.get('error', msg)}", msg["protocol"])
        raise Indeterminate(f"no reply: {msg.get('error', msg)}")

    # ------------------------------------------------------------------ public API

    def _call_raw(self, op: str, request: bytes | dict, clock_ms: int | None = None) -> concurrent.futures.Future:
        pin = {} if clock_ms is None else {"clock_ms": int(clock_ms)}
        if isinstance(request, (bytes, bytearray)):
            return self._send("call", op=op, request_b64=base64.b64encode(bytes(request)).decode(), **pin)
        return self._send("call", op=op, request=request, **pin)

    def call_async(self, op: str, request: bytes | dict) -> concurrent.futures.Future:
        """Send one call; the future resolves to a ``Reply`` or raises ``Indeterminate``."""
        raw = self._call_raw(op, request)
        out: concurrent.futures.Future = concurrent.futures.Future()

        def done(f: concurrent.futures.Future) -> None:
            try:
                msg = f.result()
                out.set_result(self._to_reply(msg))
                if msg.get("wall_ms") is not None:
                    self.last_wall_ms = msg["wall_ms"]
            except Exception as e:
                out.set_exception(e)

        raw.add_done_callback(done)
        return out

    def call(self, op: str, request: bytes | dict, timeout: float = 10.0) -> Reply:
        """One call; ``last_wall_ms`` is then the worker's wall clock at its reply."""
        return self.call_with_wall(op, request, timeout)[0]

    def call_with_wall(self, op: str, request: bytes | dict, timeout: float = 10.0,
                       clock_ms: int | None = None) -> tuple[Reply, int | None]:
        """``(reply, wall_ms)``: ``wall_ms`` is the host process's own ``time.time()``
        in ms read right after the backend call returned (None from an old host).
        ``clock_ms``: the backend decides this one call at exactly that instant
        (the host pins its backend's clock for the call; see ``chaos.host.server``)."""
        from chaos.errors import Indeterminate

        try:
            msg = self._call_raw(op, request, clock_ms).result(timeout)
        except concurrent.futures.TimeoutError:
            raise Indeterminate(f"{op}: no reply within {timeout} s") from None
        reply = self._to_reply(msg)
        wall = msg.get("wall_ms")
        if wall is not None:
            self.last_wall_ms = wall
        return reply, wall

    def now(self, timeout: float = 5.0) -> dict:
        """The host's own clocks: ``{"wall_ms", "monotonic_ns"}`` (libfaketime
        moves ``wall_ms``; the monotonic clock is never faked)."""
        msg = self._control("now", timeout=timeout)
        return {"wall_ms": msg["wall_ms"], "monotonic_ns": msg["monotonic_ns"]}

    def set_clock(self, ms: int | None) -> None:
        self._control("set-clock", ms=ms)

    def arm_barrier(self, operation_id: str) -> None:
        with self._lock:
            self._barriers[operation_id] = threading.Event()
        self._control("arm-barrier", operation_id=operation_id)

    def wait_barrier(self, operation_id: str, timeout: float = 10.0) -> bool:
        """True once the call for ``operation_id`` is parked at the barrier."""
        return self._barrier(operation_id).wait(timeout)

    def release_barrier(self, operation_id: str) -> None:
        self._control("release-barrier", operation_id=operation_id)

    def lose_next_reply(self, op_class: str) -> None:
        self._control("lose-next-reply", op_class=op_class)

    def exit_after_commit(self, op_class: str) -> None:
        self._control("exit-after-commit", op_class=op_class)

    def restart(self) -> None:
        self._control("restart")

    def export(self) -> dict:
        return self._control("export")["durable"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int | None:
        """SIGKILL the host (its own session) and reap it; returns its status."""
        from chaos.faults import procs

        if self.proc.poll() is None:
            for send in (lambda: os.killpg(self.proc.pid, signal.SIGKILL), self.proc.kill):
                try:
                    send()
                except (ProcessLookupError, PermissionError):
                    pass
        rc = self.proc.wait()
        self._cleanup(procs)
        return rc

    def close(self, timeout: float = 10.0) -> int | None:
        """Graceful stop: close stdin so the host finishes its calls and exits."""
        from chaos.faults import procs

        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return self.kill()
        rc = self.proc.wait()
        self._cleanup(procs)
        return rc

    def _cleanup(self, procs) -> None:
        procs.unregister(self.proc.pid)
        _LIVE.discard(self)
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=5.0)
        for stream in (self.proc.stdin, self.proc.stdout, self._log):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def __enter__(self) -> "HostClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except Exception:
                pass
