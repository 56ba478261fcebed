"""One OS process serving one backend over JSON lines (docs/architecture.md,
"Host processes").

Server: ``python -m chaos.host --spec-json '<json>'`` opens the backend with
``backends.registry.open_backend(spec, clock, hooks)``, prints
``{"event": "ready", "pid": N}``, then reads one JSON command per stdin line
and writes one JSON reply per stdout line (flushed each). Logs go to stderr.
Every backend call runs in its own thread, so a call parked at the barrier
never blocks the commands that follow it (``release-barrier`` among them).
Because the host is started by exec, preload libraries (libfaketime, the
fsync shim) apply to its whole backend.

Client: ``HostClient`` (below) starts one host, demultiplexes its replies by
``id`` in a reader thread, and guarantees the process never outlives it.
"""

from __future__ import annotations

import argparse
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
from typing import IO, Any

from backends.api import FileClock, FixedClock, Hooks, ReplyLost, Reply, Restartable

log = logging.getLogger("chaos.host")

CLAIM_OPS = frozenset({"acquire", "renew", "release"})
OP_CLASSES = ("claim", "publish")
EXIT_AFTER_COMMIT_STATUS = 137


def op_class(op: str) -> str | None:
    """The fault class of a public op: ``claim`` (acquire/renew/release) or ``publish``."""
    if op in CLAIM_OPS:
        return "claim"
    return "publish" if op == "publish" else None


class CallAbandoned(Exception):
    """A call parked at the barrier when the host restarted: its process state
    is gone, so it must never reach its commit."""


class _Park:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.abandoned = False


class HostHooks(Hooks):
    """The harness hooks a host installs: barrier, lost reply, exit after commit.

    The engine calls ``before_commit`` after validation and before its write
    transaction; ``after_commit`` after a commit and before the reply. Only a
    successful reply (exit 0) of the armed class consumes a one-shot fault;
    the engine calls ``after_commit`` only for a real commit, so a stored
    outcome's replay never consumes the publish class.
    """

    def __init__(self, emit) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._parks: dict[str, _Park] = {}
        self._lose: set[str] = set()
        self._exit: set[str] = set()

    def arm_barrier(self, operation_id: str) -> None:
        with self._lock:
            self._parks[operation_id] = _Park()

    def release_barrier(self, operation_id: str) -> None:
        with self._lock:
            park = self._parks.pop(operation_id, None)
        if park is not None:
            park.release.set()

    def abandon_parked(self) -> None:
        """Restart: every armed barrier is dropped; parked calls never commit."""
        with self._lock:
            parks, self._parks = list(self._parks.values()), {}
        for park in parks:
            park.abandoned = True
            park.release.set()

    def lose_next_reply(self, cls: str) -> None:
        with self._lock:
            self._lose.add(cls)

    def exit_after_commit(self, cls: str) -> None:
        with self._lock:
            self._exit.add(cls)

    def before_commit(self, request: dict) -> None:
        op_id = request.get("operation_id") if isinstance(request, dict) else None
        with self._lock:
            park = self._parks.get(op_id) if op_id is not None else None
        if park is None:
            return
        self._emit({"event": "barrier", "operation_id": op_id})
        park.release.wait()
        if park.abandoned:
            raise CallAbandoned(f"call for {op_id} abandoned by a restart while parked")

    def after_commit(self, op: str, request: dict, reply: Reply) -> None:
        cls = op_class(op)
        if cls is None or reply.exit != 0:
            return
        with self._lock:
            if cls in self._exit:
                log.warning("exit-after-commit: %s committed, exiting %d before replying", op, EXIT_AFTER_COMMIT_STATUS)
                logging.shutdown()
                os._exit(EXIT_AFTER_COMMIT_STATUS)
            if cls in self._lose:
                self._lose.discard(cls)
                raise ReplyLost(f"{op} committed; reply dropped by lose-next-reply {cls}")


class _Host:
    """The server state: one backend, its clock and hooks, and the output line."""

    def __init__(self, spec: dict, out: IO[bytes]):
        from backends.registry import open_backend  # chaos -> backends

        self._open_backend = open_backend
        self.spec = spec
        self._out = out
        self._out_lock = threading.Lock()
        self.clock = FileClock(spec["clock_file"]) if spec.get("clock_file") else FixedClock(None)
        self.hooks = HostHooks(self.emit)
        self.backend = open_backend(spec, self.clock, self.hooks)
        self._threads: list[threading.Thread] = []

    def emit(self, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._out_lock:
            self._out.write(line)
            self._out.flush()

    # ------------------------------------------------------------------ commands

    def dispatch(self, msg: dict) -> None:
        cmd, mid = msg.get("cmd"), msg.get("id")
        handler = {
            "call": self._call,
            "set-clock": self._set_clock,
            "arm-barrier": lambda m: self._ok(m, self.hooks.arm_barrier(m["operation_id"])),
            "release-barrier": lambda m: self._ok(m, self.hooks.release_barrier(m["operation_id"])),
            "lose-next-reply": lambda m: self._ok(m, self.hooks.lose_next_reply(self._cls(m))),
            "exit-after-commit": lambda m: self._ok(m, self.hooks.exit_after_commit(self._cls(m))),
            "restart": self._threaded(self._restart),
            "export": self._threaded(self._export),
            "ping": lambda m: self.emit({"id": mid, "ok": True, "pid": os.getpid()}),
        }.get(cmd)
        if handler is None:
            self.emit({"id": mid, "error": f"unknown cmd {cmd!r}"})
            return
        try:
            handler(msg)
        except Exception as e:  # a bad command must not kill the host
            log.exception("command %s failed", cmd)
            self.emit({"id": mid, "error": f"{type(e).__name__}: {e}"})

    @staticmethod
    def _cls(msg: dict) -> str:
        cls = msg.get("op_class")
        if cls not in OP_CLASSES:
            raise ValueError(f"op_class must be one of {OP_CLASSES}, not {cls!r}")
        return cls

    def _ok(self, msg: dict, _result: Any = None) -> None:
        self.emit({"id": msg.get("id"), "ok": True})

    def _threaded(self, fn):
        def start(msg: dict) -> None:
            t = threading.Thread(target=self._guard, args=(fn, msg), daemon=True, name=f"host-{msg.get('cmd')}")
            self._threads = [old for old in self._threads if old.is_alive()] + [t]
            t.start()
        return start

    def _guard(self, fn, msg: dict) -> None:
        try:
            fn(msg)
        except ReplyLost as e:
            self.emit({"id": msg.get("id"), "error": str(e), "lost": True})
        except Exception as e:
            log.exception("%s failed", msg.get("cmd"))
            self.emit({"id": msg.get("id"), "error": f"{type(e).__name__}: {e}"})

    def _call(self, msg: dict) -> None:
        if "request_b64" in msg:
            request: bytes | dict = base64.b64decode(msg["request_b64"])
        else:
            request = msg["request"]
        op = msg["op"]

        def run(m: dict) -> None:
            reply = self.backend.call(op, request)
            self.emit({"id": m.get("id"), "exit": reply.exit, "envelope": reply.envelope})

        self._threaded(run)(msg)

    def _set_clock(self, msg: dict) -> None:
        ms = msg.get("ms")
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int)):
            raise ValueError(f"ms must be an integer or null, not {ms!r}")
        self.clock.set(ms)
        self._ok(msg)

    def _restart(self, msg: dict) -> None:
        self.hooks.abandon_parked()
        if isinstance(self.backend, Restartable):
            self.backend.restart()
        else:
            self.backend.close()
            self.backend = self._open_backend(self.spec, self.clock, self.hooks)
        self._ok(msg)

    def _export(self, msg: dict) -> None:
        store = getattr(self.backend, "store", None)
        if store is None:
            raise RuntimeError(f"{type(self.backend).__name__} exposes no store to export")
        self.emit({"id": msg.get("id"), "durable": store.export_durable()})

    def shutdown(self) -> None:
        self.hooks.abandon_parked()
        for t in self._threads:
            t.join(timeout=5.0)
        self.backend.close()


def serve(host: _Host, stdin: IO[bytes]) -> None:
    """Announce readiness, then run commands until stdin closes."""
    host.emit({"event": "ready", "pid": os.getpid()})
    for raw in stdin:
        if not raw.strip():
            continue
        try:
            msg = json.loads(raw)
            if not isinstance(msg, dict):
                raise ValueError("a command is a JSON object")
        except ValueError as e:
            host.emit({"id": None, "error": f"bad command line: {e}"})
            continue
        host.dispatch(msg)
    host.shutdown()


def main(argv: list[str] | None = None) -> int:
    from chaos.errors import ExitCode

    parser = argparse.ArgumentParser(prog="python -m chaos.host", description=__doc__.splitlines()[0])
    parser.add_argument("--spec-json", required=True, help="the backend spec as one JSON object")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=f"host[{os.getpid()}] %(levelname)s %(message)s")
    # The protocol owns the real stdout; anything else printing goes to stderr.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        spec = json.loads(args.spec_json)
        if not isinstance(spec, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        print(f"chaos.host: --spec-json: {e}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        host = _Host(spec, out)
    except (KeyError, ValueError) as e:  # unknown backend, missing path, contradicting spec
        print(f"chaos.host: bad backend spec: {type(e).__name__}: {e}", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as e:
        log.debug("opening the backend failed", exc_info=True)
        print(f"chaos.host: cannot open backend: {type(e).__name__}: {e}", file=sys.stderr)
        return ExitCode.CRASH
    serve(host, sys.stdin.buffer)
    return 0


# =========================================================================== client

_LIVE: "weakref.WeakSet[HostClient]" = weakref.WeakSet()
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])


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
                 python: str = sys.executable, ready_timeout: float = 30.0):
        from chaos.errors import SetupFailed
        from chaos.faults import procs

        self.spec = spec
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, full_env.get("PYTHONPATH")) if p)
        full_env.update(env or {})
        self._log = open(log_path, "ab") if log_path else None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._barriers: dict[str, threading.Event] = {}
        self._ready = threading.Event()
        self._dead_reason: str | None = None
        self.proc = subprocess.Popen(
            [python, "-m", "chaos.host", "--spec-json", json.dumps(spec)],
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
        from chaos.errors import Indeterminate

        if "exit" in msg and "envelope" in msg:
            return Reply(msg["exit"], msg["envelope"])
        kind = "reply lost" if msg.get("lost") else "no reply"
        raise Indeterminate(f"{kind}: {msg.get('error', msg)}")

    # ------------------------------------------------------------------ public API

    def call_async(self, op: str, request: bytes | dict) -> concurrent.futures.Future:
        """Send one call; the future resolves to a ``Reply`` or raises ``Indeterminate``."""
        if isinstance(request, (bytes, bytearray)):
            raw = self._send("call", op=op, request_b64=base64.b64encode(bytes(request)).decode())
        else:
            raw = self._send("call", op=op, request=request)
        out: concurrent.futures.Future = concurrent.futures.Future()

        def done(f: concurrent.futures.Future) -> None:
            try:
                out.set_result(self._to_reply(f.result()))
            except Exception as e:
                out.set_exception(e)

        raw.add_done_callback(done)
        return out

    def call(self, op: str, request: bytes | dict, timeout: float = 10.0) -> Reply:
        from chaos.errors import Indeterminate

        try:
            return self.call_async(op, request).result(timeout)
        except concurrent.futures.TimeoutError:
            raise Indeterminate(f"{op}: no reply within {timeout} s") from None

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

    def ping(self) -> int:
        return self._control("ping")["pid"]

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


if __name__ == "__main__":
    sys.exit(main())
