"""Shared plumbing of adapters whose backend runs in a ``chaos.host`` process.

The backend is a fresh OS process (``HostClient``); every mechanism is real:

* clock: ``set_clock`` before each action (held frozen: the host's clock is a
  file clock that does not tick), written to the clock file before the first
  host starts so the backend never sees the wall clock;
* barrier: ``arm_barrier`` + ``call_async`` + ``wait_barrier``; the commit is
  ``release_barrier`` after the runner has set the commit's clock;
* reply loss: ``exit_after_commit`` (the host process dies right after the
  commit, before any reply; a fresh host is started on the same storage) when
  no other call is parked, else ``lose_next_reply``;
* restart: SIGKILL the host (parked calls die with it) and start a fresh one.

Subclasses supply storage: ``prepare(case)`` (provision + seed before the
host serves), ``spec()``, ``host_env()``, ``export_storage()``, and the
commit fault (``arm_commit_fault`` / ``disarm_commit_fault``).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
import time
from pathlib import Path

from backends.api import FileClock, ReplyLost
from backends.contract.records import Reply
from chaos.conform.adapters.base import AdapterError, Parked, Profile
from chaos.errors import Indeterminate, ReplyLostIndeterminate
from chaos.host import EXIT_AFTER_COMMIT_STATUS, HostClient

CALL_TIMEOUT_S = 30.0
BARRIER_POLL_S = 0.02


class HostParked(Parked):
    def __init__(self, request: dict, future: concurrent.futures.Future):
        super().__init__(request)
        self.future = future


class HostedAdapter:
    """Base class; see the module docstring."""

    profile: Profile
    backend: str = ""

    def __init__(self, options: dict | None = None):
        self.options = dict(options or {})
        self.dir = Path(tempfile.mkdtemp(prefix=f"chaos-conform-{self.backend}-"))
        self.clock_file = str(self.dir / "clock")
        self.host: HostClient | None = None
        self.hosts_started = 0
        self.parked: dict[str, HostParked] = {}
        self.loss_pending: set[str] = set()   # op classes armed by the runner, not yet in the host
        self.loss_by_exit: set[str] = set()   # op classes armed in the host with exit-after-commit
        self.loss_by_drop: set[str] = set()   # op classes armed in the host with lose-next-reply
        self.commit_fault_pending = False
        self.fired: set[str] = set()

    # ------------------------------------------------------------------ hooks for subclasses

    def prepare(self, case) -> None: ...
    def spec(self) -> dict: ...
    def host_env(self) -> dict: return {}
    def export_storage(self) -> dict: ...
    def arm_commit_fault(self) -> None: ...
    def disarm_commit_fault(self) -> None: ...
    def arm_sticky_fault(self, name: str) -> None: ...
    def teardown_storage(self) -> None: ...

    # ------------------------------------------------------------------ host lifecycle

    def _start_host(self) -> None:
        self.hosts_started += 1
        log = str(self.dir / f"host-{self.hosts_started}.log")
        self.host = HostClient(self.spec(), env=self.host_env(), log_path=log)

    def _kill_host(self) -> None:
        if self.host is not None:
            self.host.kill()
            self.host = None
        self.parked.clear()

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = (self.dir / f"host-{self.hosts_started}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    # ------------------------------------------------------------------ Adapter protocol

    def not_applicable(self, case) -> str | None:
        return None

    def unsupported_write_path(self, case, supported: dict[str, str]) -> str | None:
        """Why the case's write-path inventory cannot be configured here: every
        entry must be the fenced one, except ``alternate``, which may also be a
        real ``bypass`` writer (the advisory cases)."""
        for key, value in case.initial["backend"]["write_paths"].items():
            if key == "alternate" and value in ("none", "bypass"):
                continue
            if supported.get(key) != value:
                return f"{self.backend} cannot be configured with write path {key}={value!r}"
        return None

    def adjust_expected(self, case, expected: dict) -> list[str]:
        return []

    def setup(self, case, clock_ms: int) -> None:
        FileClock(self.clock_file).set(clock_ms)  # pinned before the backend exists
        self.prepare(case)
        for name, armed in case.initial["faults"].items():
            if armed:
                self.arm_fault(name)
        self._start_host()
        self.set_clock(clock_ms)

    def set_clock(self, ms: int) -> None:
        self.host.set_clock(ms)

    def _lost(self, cls: str) -> bool:
        """After an ``Indeterminate``: was it the armed exit-after-commit?"""
        if cls not in self.loss_by_exit or self.host is None:
            return False
        try:
            rc = self.host.proc.wait(10)
        except Exception:
            return False
        if rc != EXIT_AFTER_COMMIT_STATUS:
            return False
        self.loss_by_exit.discard(cls)
        self._fresh_host()  # reap; then a fresh process on the same storage
        return True

    def _last_clock(self) -> int:
        return FileClock(self.clock_file).now_ms()

    def _result(self, future: concurrent.futures.Future, cls: str | None) -> Reply:
        try:
            return future.result(CALL_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise AdapterError(f"no reply within {CALL_TIMEOUT_S} s") from None
        except Indeterminate as e:
            if cls is not None and self._lost(cls):
                raise ReplyLost(f"host exited after commit ({e})") from None
            if cls in self.loss_by_drop and isinstance(e, ReplyLostIndeterminate):
                self.loss_by_drop.discard(cls)
                raise ReplyLost(str(e)) from None
            raise AdapterError(f"{e} [host log: {self.log_tail()}]") from None

    def call(self, op: str, request: dict) -> Reply:
        cls = "claim" if op in ("acquire", "renew", "release") else ("publish" if op == "publish" else None)
        if cls is not None:
            self._push_loss(cls)
        if op == "publish" and self.commit_fault_pending:
            return self._with_commit_fault(lambda: self._result(self.host.call_async(op, request), cls))
        return self._result(self.host.call_async(op, request), cls)

    def start_publish(self, request: dict) -> Reply | Parked:
        op_id = request["operation_id"]
        self.host.arm_barrier(op_id)
        future = self.host.call_async("publish", request)
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.host.wait_barrier(op_id, BARRIER_POLL_S):
                parked = HostParked(request, future)
                self.parked[op_id] = parked
                return parked
            if future.done():
                self.host.release_barrier(op_id)  # disarm: the call ended before the hook
                return self._result(future, "publish")
        raise AdapterError(f"publish {op_id} neither returned nor reached the barrier")

    def finish_publish(self, parked: Parked) -> Reply:
        op_id = parked.request["operation_id"]
        if self.parked.pop(op_id, None) is not parked:
            raise AdapterError(f"publish {op_id} is no longer parked (its host was restarted)")

        def release() -> Reply:
            self._push_loss("publish")
            self.host.release_barrier(op_id)
            return self._result(parked.future, "publish")

        if self.commit_fault_pending:
            return self._with_commit_fault(release)
        return release()

    def _with_commit_fault(self, commit) -> Reply:
        """Arm the commit fault right before the commit, disarm right after."""
        self.arm_commit_fault()
        try:
            reply = commit()
        finally:
            self.disarm_commit_fault()
        if reply.exit == 6 and reply.envelope.get("error", {}).get("code") == "publication-outcome-unknown":
            self.commit_fault_pending = False
            self.fired.add("publication-outcome-unknown")
        return reply

    def arm_fault(self, name: str) -> None:
        if name == "publication-outcome-unknown":
            self.commit_fault_pending = True
        elif name == "clock_floor_persist":
            self.arm_sticky_fault(name)
        elif name in ("claim-response-loss", "publication-response-loss"):
            cls = "claim" if name == "claim-response-loss" else "publish"
            self.loss_pending.add(cls)
        else:
            raise ValueError(f"unknown fault {name!r}")

    def _push_loss(self, cls: str) -> None:
        """Arm a pending loss in the host right before a call of its class:
        a real process exit after the commit when no other call is parked
        (the exit would take them along), else a dropped reply."""
        if cls not in self.loss_pending:
            return
        self.loss_pending.discard(cls)
        if self.parked:
            self.loss_by_drop.add(cls)
            self.host.lose_next_reply(cls)
        else:
            self.loss_by_exit.add(cls)
            self.host.exit_after_commit(cls)

    def take_fired(self, name: str) -> bool:
        if name in self.fired:
            self.fired.discard(name)
            return True
        return False

    def restart(self) -> None:
        self._fresh_host()

    def _fresh_host(self) -> None:
        """SIGKILL the host (and its parked calls), start a fresh one on the
        same storage, re-pin the clock, re-arm the faults (they survive, §7)."""
        self._kill_host()
        self._start_host()
        self.set_clock(self._last_clock())
        self.loss_pending |= self.loss_by_exit | self.loss_by_drop
        self.loss_by_exit.clear()
        self.loss_by_drop.clear()

    def export(self) -> dict:
        if self.host is not None:
            self.host.close()  # graceful: the file is exported by a fresh reader
            self.host = None
        return self.export_storage()

    def close(self) -> None:
        try:
            self._kill_host()
            self.teardown_storage()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

