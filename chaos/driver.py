"""The real-time driver of ``workloads.interpreter.interpret`` and the nemesis executor.

``RealDriver`` gives the interpreter the run's monotonic clock (ns since the
run started), dispatches client ops to worker ``Slot``s and nemesis ops to the
``NemesisExecutor`` thread, waits on one completion queue, and appends every
invoke and completion to the history file as it happens. ``FaultEnv`` is what
a nemesis package's ``execute`` sees: the slots, the per-slot clock faults,
the fsync fault, paused PIDs, coverage, the history (for evidence) and the
run's target (``chaos.sut``: a server, its proxy and fsync fault).
"""

from __future__ import annotations

import queue
import sys
import threading
import time

from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage
from workloads.generator import NEMESIS


class FaultEnv:
    def __init__(self, slots, clock_faults: dict, fsync, coverage: Coverage, history: HistoryWriter, t0: int,
                 target=None):
        self.slots = slots
        self.target = target            # chaos.sut.Target: the server, proxy, server fsync fault
        self.wall0_ns = time.time_ns() - (time.monotonic_ns() - t0)  # our wall clock at t0
        self.clock_faults = clock_faults
        self.fsync = fsync
        self.fsync_armed_at: int | None = None
        self.power = None               # chaos.faults.powerloss.PowerLoss when the power-loss nemesis runs
        self.routes = None              # chaos.nemesis.partition.Routes: one proxy per worker (partition)
        self.partition_base: dict = {}  # evidence counters at the cut, per cut group
        self.paused: dict = {}          # slot -> the ProcessTree the pause nemesis holds stopped
        self.coverage = coverage
        self.history = history
        self.t0 = t0

    def now_ns(self) -> int:
        return time.monotonic_ns() - self.t0

    def uncertain_since(self, t_ns: int) -> int:
        """Client completions since ``t_ns`` that ended ``info`` or exit 6."""
        n = 0
        for op in reversed(self.history.snapshot()):
            if op["time"] < t_ns:
                break
            if op.get("process") == NEMESIS or op["type"] == "invoke":
                continue
            if op["type"] == "info" or (op.get("value") or {}).get("exit") == 6:
                n += 1
        return n


#: the longest one nemesis step may take before the schedule moves on without it
STEP_TIMEOUT_S = 10.0


class NemesisExecutor:
    """Runs nemesis ops one at a time on its own thread.

    Every step has a bounded time (``step_timeout``): a step still running
    then is abandoned (its thread finishes or dies on its own; its late
    result is dropped) and completes ``info`` with ``timed_out``, so one stuck
    command never swallows the rest of the schedule."""

    def __init__(self, table: dict, env: FaultEnv, completions: queue.Queue, step_timeout: float = STEP_TIMEOUT_S):
        self.table = table
        self.env = env
        self.completions = completions
        self.step_timeout = step_timeout
        self._inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, daemon=True, name="nemesis").start()

    def submit(self, op: dict) -> None:
        self._inbox.put(op)

    def stop(self) -> None:
        self._inbox.put(None)

    def run_op(self, op: dict) -> dict:
        pkg = self.table[op["f"]]
        box: dict = {}

        def step() -> None:
            try:
                box["value"], box["type"] = pkg.execute(self.env, op), "ok"
            except Exception as e:  # the fault could not be applied: say so, never pretend
                box["value"], box["type"] = {"took_effect": False, "error": f"{type(e).__name__}: {e}"}, "info"

        worker = threading.Thread(target=step, daemon=True, name=f"nemesis-{op['f']}")
        worker.start()
        worker.join(self.step_timeout)
        if worker.is_alive():
            value, typ = {"took_effect": False, "timed_out": True,
                          "error": f"nemesis step {op['f']} did not finish within {self.step_timeout:g} s; abandoned"}, "info"
        else:
            value, typ = box["value"], box["type"]
        if op["f"] == pkg.name:
            self.env.coverage.fired(pkg.name, value.get("took_effect") is True)
        return {"process": NEMESIS, "type": typ, "f": op["f"], "value": value}

    def _loop(self) -> None:
        while True:
            op = self._inbox.get()
            if op is None:
                return
            self.completions.put(self.run_op(op))


class RealDriver:
    def __init__(self, history: HistoryWriter, slots, nemesis: NemesisExecutor | None, t0: int,
                 stop: threading.Event):
        self.history = history
        self.slots = slots
        self.nemesis = nemesis
        self.t0 = t0
        self.stop = stop
        self.completions: queue.Queue = queue.Queue()
        self.ops = 0
        self.phase: str | None = None   # what the run does once past its time limit (the progress line says it)

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def stopped(self) -> bool:
        return self.stop.is_set()

    def dispatch(self, thread, op: dict) -> None:
        if thread == NEMESIS:
            self.nemesis.submit(op)
        else:
            self.slots[thread].submit(op)

    def wait(self, until: int | None) -> list[dict]:
        timeout = 0.25 if until is None else max(0.0, min(0.25, (until - self.now()) / 1e9))
        try:
            first = self.completions.get(timeout=timeout)
        except queue.Empty:
            return []
        out = [first]
        while True:
            try:
                out.append(self.completions.get_nowait())
            except queue.Empty:
                break
        now = self.now()
        return [dict(ev, time=now) for ev in out]

    def record(self, op: dict) -> dict:
        if op.get("type") != "invoke" and op.get("process") != NEMESIS:
            self.ops += 1
        return self.history.append(op)


class Progress:
    """A progress line on stderr: ``\\r`` updates on a TTY, else a line every few seconds."""

    def __init__(self, driver: RealDriver, coverage: Coverage | None, time_limit: float):
        self.driver, self.coverage, self.time_limit = driver, coverage, time_limit
        self.tty = sys.stderr.isatty()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")
        self._thread.start()

    def line(self) -> str:
        t = self.driver.now() / 1e9
        faults = sum(v["fired"] for v in self.coverage.to_json().values())
        if t <= self.time_limit and self.driver.phase is None:
            where = f"{t:6.1f}s / {self.time_limit:.0f}s"
        else:   # past the limit: say what it waits for, not a clock counting on past its end
            phase = self.driver.phase or "past the time limit: finishing the episodes and faults under way"
            where = f"{t:6.1f}s  {phase}"
        return f"chaos: {where}  ops {self.driver.ops}  faults {faults}"

    def _loop(self) -> None:
        every = 0.5 if self.tty else 5.0
        while not self._done.wait(every):
            if self.tty:
                sys.stderr.write("\r" + self.line())
            else:
                sys.stderr.write(self.line() + "\n")
            sys.stderr.flush()

    def close(self) -> None:
        self._done.set()
        if self.tty:
            sys.stderr.write("\r" + self.line() + "\n")
            sys.stderr.flush()
