"""The host process: one OS process serving one backend over JSON lines
(docs/architecture.md, "Host processes").

``python -m chaos.host --spec-json '<json>'`` (or ``--spec-env VAR``, as
``HostClient`` does, so a DSN password never shows in ``ps``) opens the backend with
``backends.registry.open_backend(spec, clock, hooks)``, prints
``{"event": "ready", "pid": N}``, then reads one JSON command per stdin line
and writes one JSON reply per stdout line (flushed each). Logs go to stderr.
Every backend call runs in its own thread, so a call parked at the barrier
never blocks the commands that follow it (``release-barrier`` among them).
A ``call`` with ``clock_ms`` is decided at exactly that instant: an
in-process backend's clock is pinned for the call; a black-box program's
process gets libfaketime absolute time for that one invocation (the host's
own clock, and every other call, are untouched).
Because the host is started by exec, preload libraries (libfaketime, the
fsync shim) apply to its whole backend.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import IO, Any

from backends.api import FileClock, FixedClock, Hooks, ReplyLost, Restartable
from backends.contract.records import Reply

log = logging.getLogger("chaos.host")

CLAIM_OPS = frozenset({"acquire", "renew", "release"})
OP_CLASSES = ("claim", "publish")
EXIT_AFTER_COMMIT_STATUS = 137
#: environment variable naming the dir for a black-box pin's timestamp file
PIN_DIR_ENV = "CLAIM_CHAOS_PIN_DIR"


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
        from backends.external import ExternalBackend

        # an external program decides in its own process: its exit-0 reply is the
        # only commit evidence, so the host applies the after-commit faults itself
        self._black_box = isinstance(self.backend, ExternalBackend)
        self._threads: list[threading.Thread] = []
        self._pin_clock = None       # black box: the libfaketime timestamp file of a pinned call
        self._own_pin_dir: str | None = None

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
            "now": lambda m: self.emit({"id": mid, "wall_ms": time.time_ns() // 1_000_000,
                                        "monotonic_ns": time.monotonic_ns()}),
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
            evidence = getattr(e, "evidence", None)  # backends.external.ReplyProtocolError
            self.emit({"id": msg.get("id"), "error": f"{type(e).__name__}: {e}",
                       **({"protocol": evidence} if isinstance(evidence, dict) else {})})

    def _call(self, msg: dict) -> None:
        if "request_b64" in msg:
            request: bytes | dict = base64.b64decode(msg["request_b64"])
        else:
            request = msg["request"]
        op = msg["op"]
        pin = msg.get("clock_ms")
        if pin is not None and (isinstance(pin, bool) or not isinstance(pin, int)):
            raise ValueError(f"clock_ms must be an integer, not {pin!r}")

        def run(m: dict) -> None:
            if pin is None:
                reply = self.backend.call(op, request)
            else:
                with self._pinned(pin):
                    reply = self.backend.call(op, request)
            if self._black_box:  # no engine inside to call the hooks: the reply is the commit point
                self.hooks.after_commit(op, request if isinstance(request, dict) else {}, reply)
            # the worker's own wall clock (libfaketime moves it), read as the call returns
            wall_ms = time.time_ns() // 1_000_000
            self.emit({"id": m.get("id"), "exit": reply.exit, "envelope": reply.envelope, "wall_ms": wall_ms})

        self._threaded(run)(msg)

    @contextlib.contextmanager
    def _pinned(self, ms: int):
        """The backend decides inside this block at exactly ``ms``. The worker
        sends one call at a time, so no other call of this host overlaps it."""
        if self._black_box:
            from chaos.faults.faketime import ClockFault

            if self._pin_clock is None:
                self._pin_clock = ClockFault(os.path.join(self._pin_dir(), f"pin-{os.getpid()}"))
            self._pin_clock.set_absolute(ms)
            saved = dict(self.backend.env)
            preload = saved.get("LD_PRELOAD", os.environ.get("LD_PRELOAD", ""))
            pin_env = self._pin_clock.env(preload or None)
            if "libfaketime" in preload:  # already preloaded (the clock nemesis): point it at the pin
                pin_env["LD_PRELOAD"] = preload
            self.backend.env.update(pin_env)
            try:
                yield
            finally:
                self.backend.env.clear()
                self.backend.env.update(saved)
            return
        if not isinstance(self.clock, FixedClock):
            raise ValueError("clock_ms needs the host's own clock (this host shares a clock file)")
        before = self.clock.ms
        self.clock.set(ms)
        try:
            yield
        finally:
            self.clock.set(before)

    def _pin_dir(self) -> str:
        """Where a black-box pin's timestamp file lives: the run's tmp dir when
        the worker was given one (removed with it), else a dir of our own."""
        d = os.environ.get(PIN_DIR_ENV)
        if d:
            return d
        if self._own_pin_dir is None:
            import tempfile

            self._own_pin_dir = tempfile.mkdtemp(prefix="chaos-host-pin-")
        return self._own_pin_dir

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
        if self._own_pin_dir is not None:
            import shutil

            shutil.rmtree(self._own_pin_dir, ignore_errors=True)


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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec-json", help="the backend spec as one JSON object")
    source.add_argument("--spec-env", metavar="VAR",
                        help="read the spec from this environment variable (keeps a DSN password out of `ps`)")
    args = parser.parse_args(argv)
    from chaos.faults.procs import set_child_subreaper

    # what a backend's program leaves behind, even in a session of its own (setsid),
    # stays in this host's tree, so it dies with the worker (Slot.kill, the watchdog)
    set_child_subreaper()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=f"host[{os.getpid()}] %(levelname)s %(message)s")
    # The protocol owns the real stdout; anything else printing goes to stderr.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        text = args.spec_json if args.spec_json is not None else os.environ.pop(args.spec_env, None)
        if text is None:
            raise ValueError(f"environment variable {args.spec_env} is not set")
        spec = json.loads(text)
        if not isinstance(spec, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        print(f"chaos.host: backend spec: {e}", file=sys.stderr)
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
