"""The workload interpreter's driver in a deterministic run: its clock is the scheduler's virtual clock,
its workers are processes under the scheduler, and its completions come in schedule order, each naming
the exact fault that hit its call (the racer's own inside it, a requested one beside it).
"""

from __future__ import annotations

import json
import sys

from checkers.history import classify
from chaos.deterministic.callfaults import CallFaults
from chaos.deterministic.plan import SEC_NS
from chaos.deterministic.processes import SchedulerStuck
from chaos.deterministic.scheduler import Scheduler
from chaos.deterministic.shim import EPOCH_NS
from chaos.driver import Progress
from chaos.history_store import HistoryWriter
from workloads.generator import NEMESIS

#: the scheduler's fault action -> the nemesis it serves (an errno is the fsync nemesis's)
NEMESIS_OF = {"kill": "kill", "freeze": "pause", "lost-reply": "lost-reply", "power-loss": "power-loss",
              "clock": "clock", "restart": "restart"}
#: a target's clock shows the step when its reply's wall_ms is this close to virtual time + offset
CLOCK_TOLERANCE_MS = 1000


class DeterministicDriver:
    """The interpreter's driver: virtual time, workers under the scheduler, completions in schedule order."""

    def __init__(self, sched: Scheduler, history: HistoryWriter, spec: dict, log_dir: str,
                 worker_env: dict | None = None, op_timeout_s: float = 8.0, note_pid=None):
        self.sched, self.history, self.spec, self.log_dir = sched, history, spec, log_dir
        self.note_pid = note_pid or (lambda pid: None)   # the run's watchdog kills it if the run dies
        self.calls = CallFaults(sched, int(op_timeout_s * SEC_NS))   # the racers' faults inside one call
        self.worker_env = worker_env or {}   # the power-loss journal's preload and files
        self.procs: dict = {}          # client thread -> its worker Proc
        self.started: dict = {}        # client thread -> incarnations started
        self.inflight: dict = {}       # worker pid -> the op it serves
        self.pending: list[dict] = []  # completions to hand out at the next wait
        self.ready: set = set()
        self.reported: set = set()     # (rule id, process) of the fault points already named in a completion
        self.clocks_seen: dict = {}    # target thread -> the wall-clock offsets (ms) its replies showed
        self.ops = 0

    def now(self) -> int:
        return self.sched.vt

    def stopped(self) -> bool:
        return False

    def record(self, op: dict) -> dict:
        if op.get("type") != "invoke" and op.get("process") != NEMESIS:
            self.ops += 1
        return self.history.append(op)

    def dispatch(self, thread, op: dict) -> None:
        if self.calls.defer(thread, op):   # a frozen call's rival: sent once the freeze landed
            return
        self._restart_if_due(thread)
        proc = self._worker(thread)
        if proc is None:
            self.pending.append({"process": op["process"], "f": op["f"], "type": "info",
                                 "error": "the worker process died before it was ready"})
            return
        msg = {"f": op["f"], "value": op["value"], **({"clock_ms": op["clock_ms"]} if "clock_ms" in op else {})}
        self.inflight[proc.pid] = op
        v = op["value"] if isinstance(op.get("value"), dict) else {}
        item = (v["ledger_namespace"], v["item_id"]) if "ledger_namespace" in v and "item_id" in v else None
        self.sched.begin_call(proc, op["f"], item)
        self.calls.arm(proc, op)
        self.sched.send(proc, json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

    def wait(self, until: int | None) -> list[dict]:
        if not self.pending and not self.calls.released:
            replies = self.sched.run_until(until)
            if until is None and not replies and self.inflight and not self.sched.handed_back:
                # nothing can run, no deadline, no wake left: the ops in flight can never be answered
                raise SchedulerStuck(f"deadlock: {len(self.inflight)} op(s) in flight and no controlled thread "
                                     f"can ever run: {self.sched.states()}")
            self._replies(replies)
        for thread, op in self.calls.take_released():
            self.dispatch(thread, op)
        self.record_clock_faults()
        out, self.pending = self.pending, []
        return [dict(ev, time=self.sched.vt) for ev in out]

    def _restart_if_due(self, thread) -> None:
        """A requested restart at its exact point: the n-th op handed to a worker that has a process,
        from the rule's instant on. That process ends between two of its ops (it serves none: no call
        is cut short) and a fresh one, its state dropped and the store reopened, serves the op: what
        the timed nemesis asks a host to do, or does by replacing it. Recorded as that nemesis records
        it, with the point."""
        proc = self.procs.get(thread)
        if proc is None or proc.gone:   # nothing to restart: this hand-out is not a point of the rule
            return
        # (its rule names no process and no predicate: ``matches`` never looks at the thread)
        rule = next((r for r in self.sched.faults if r.action == "restart"
                     and r.matches(None, "restart", 0, self.sched.vt)), None)
        if rule is None:
            return
        rule.evidence = {"process": proc.name, "call": "restart", "between_ops": True, "vt_ns": self.sched.vt,
                         "action": "restart"}
        self.sched.trace.append(f"{self.sched.vt} {proc.name} FAULT restart")
        self._retire(proc)
        self._nemesis_op("restart", {"targets": [thread]},
                         {"restarted": [{"slot": thread, "restarted": True, "via": "a fresh process between its ops"}],
                          "exact": True, "point": dict(rule.evidence), "took_effect": True})

    def _retire(self, proc) -> None:
        """End a worker's process now, and any reply of it not handed out yet: its next op starts a fresh one."""
        self.sched.kill(proc)
        self.sched.replies = [(p, line) for p, line in self.sched.replies if p is not proc]

    def _nemesis_op(self, f: str, value, outcome: dict) -> None:
        """A fault the schedule made, recorded as the timed nemesis records its op: invoke, then info."""
        self.history.append({"process": NEMESIS, "type": "invoke", "f": f, "value": value, "time": self.sched.vt})
        self.history.append({"process": NEMESIS, "type": "info", "f": f, "time": self.sched.vt, "value": outcome})

    def _worker(self, thread):
        proc = self.procs.get(thread)
        if proc is not None and not proc.gone:
            return proc
        n = self.started.get(thread, 0)
        self.started[thread] = n + 1
        env = {**self.worker_env, "CHAOS_DET_SPEC": json.dumps(self.spec)}
        proc = self.sched.spawn(f"w{thread}.{n}", [sys.executable, "-m", "chaos.deterministic.worker"],
                                control=True, env=env)
        self.note_pid(proc.pid)
        self.procs[thread] = proc
        while proc.pid not in self.ready and not proc.gone:
            events = self.sched.run_until(None)
            if not events and not self.sched.handed_back:
                break
            self._replies(events)
        return proc if proc.pid in self.ready else None

    def _replies(self, events) -> None:
        for proc, line in events:
            self._reply(proc, line)

    def _reply(self, proc, line: bytes | None) -> None:
        op = self.inflight.pop(proc.pid, None)   # (a worker's hello comes before it is handed any op)
        inside = self.calls.finish(proc, op) if op is not None else None
        self.calls.rival_done(op)
        self._complete(proc, line, op, inside)

    def _complete(self, proc, line: bytes | None, op: dict | None, inside: dict | None) -> None:
        """``op``'s completion from ``proc``'s reply ``line`` (None: it died), naming the exact fault
        that hit the call: the racer's own (``inside``) first, a requested fault beside it."""
        if line is None:
            self._rearm_lost_replies(proc)
            if op is not None:
                done = {"process": op["process"], "f": op["f"], "type": "info",
                        "error": f"worker {proc.name} died during the call"}
                point = self._fault_point(proc)
                if point or inside:
                    done["fault"] = _both(inside, point)
                self.pending.append(done)
            return
        msg = json.loads(line)
        if msg.get("ready"):
            self.ready.add(proc.pid)
            return
        if op is None:
            return
        if "error" in msg:   # the call raised in the worker: outcome unknown, and a fresh worker next
            self._rearm_lost_replies(proc)
            done = {"process": op["process"], "f": op["f"], "type": "info", "error": msg["error"][:500]}
            point = self._fault_point(proc)
            self.pending.append(dict(done, fault=_both(inside, point)) if point or inside else done)
            self._retire(proc)
            return
        done = {"process": op["process"], "f": op["f"], "type": classify(msg["exit"], msg["envelope"]),
                "value": {"exit": msg["exit"], "envelope": msg["envelope"]}, "wall_ms": msg["wall_ms"]}
        self._clock_seen(proc, msg["wall_ms"])
        if "clock_ms" in op:
            done["clock_ms"] = op["clock_ms"]
        point = self._fault_point(proc, replied=True)
        if point and point["kind"] == "lost-reply":   # the call went through; its reply never reaches the client
            done = {"process": op["process"], "f": op["f"], "type": "info",
                    "error": "reply lost (an exact lost-reply fault inside the call)"}
        if point or inside:
            done["fault"] = _both(inside, point)
        self.pending.append(done)

    def record_clock_faults(self) -> None:
        """Record each clock step that came since the last look as a nemesis op (the timed
        nemesis's shape), its point named in the completion."""
        for rule in self.sched.faults:
            if rule.action == "clock" and rule.evidence and id(rule) not in self.reported:
                self.reported.add(id(rule))
                self._nemesis_op("clock", rule.value,
                                 {"mode": rule.value["mode"], "offset_s": rule.value["offset_s"],
                                  "targets": rule.value["targets"], "exact": True, "point": dict(rule.evidence),
                                  "took_effect": True})

    def _clock_seen(self, proc, wall_ms: int) -> None:
        """A target's reply: how far its own wall clock (its ``wall_ms``) is from the virtual clock."""
        offset = self.sched.clock_offset(proc.name)
        if offset:
            thread = int(proc.name[1:].split(".", 1)[0])
            seen = self.clocks_seen.setdefault(thread, [])
            shift = wall_ms - (EPOCH_NS + self.sched.vt) // 1_000_000
            if len(seen) < 3 and shift not in seen:
                seen.append(shift)

    def heal_clocks(self) -> bool | None:
        """The heal of the clock faults (``clock-reset``, as the timed nemesis records it), with each
        target's clocks seen before it. True when a target's clock showed a step it was given,
        None when no clock fault came."""
        healed = self.sched.heal_clocks()
        steps = [r for r in self.sched.faults if r.action == "clock" and r.evidence]
        if not steps:
            return None
        wants = {v // 1_000_000 for r in steps for v in (r.offsets or {}).values()}
        before = [{"slot": t, "worker_offsets_ms": seen,
                   "shifted": any(abs(o - w) <= CLOCK_TOLERANCE_MS for o in seen for w in wants)}
                  for t, seen in sorted(self.clocks_seen.items())]
        took = any(c["shifted"] for c in before)
        targets = sorted({int(p[1:-1]) for p in healed})
        self._nemesis_op("clock-reset", {"targets": targets},
                         {"mode": "reset", "targets": targets, "clocks_before_reset": before, "took_effect": took})
        return took

    def _rearm_lost_replies(self, proc) -> None:
        """A lost reply whose call never replied (its worker died first, or the call raised) took no
        effect: the rule fires again at the next matching point (the same one in every run)."""
        for rule in self.sched.faults:
            ev = rule.evidence
            if rule.action == "lost-reply" and ev and _served_by(ev, proc) and not ev.get("reply_dropped"):
                rule.evidence, rule.seen = None, rule.nth - 1
                rule.value = {"rearmed": (rule.value or {}).get("rearmed", 0) + 1}
                self.reported.discard((id(rule), proc.name))

    def _fault_point(self, proc, replied: bool = False) -> dict | None:
        """The exact fault that hit this worker during its current op, if one did: every fault that
        came since its last reply is said now, once (a power cut kills every worker: each op it cut
        short names it), the completion names a lost reply first, else the first that came.
        ``replied``: the worker replied (a lost reply then takes effect: the caller drops it)."""
        came = []
        for rule in self.sched.faults:
            ev = rule.evidence
            if not ev or rule.action == "clock" or (id(rule), proc.name) in self.reported:
                continue
            # (a fault at a point of one of its children, git say, hit this worker's call too)
            if _served_by(ev, proc) or proc.name in ev.get("killed", ()):
                self.reported.add((id(rule), proc.name))
                if rule.action == "lost-reply" and replied:
                    ev["reply_dropped"] = True   # its evidence of effect: the caller drops the reply it handles
                came.append(rule)
        if not came:
            return None
        rule = next((r for r in came if r.action == "lost-reply"), came[0])
        return {"kind": NEMESIS_OF.get(rule.action, "fsync"), "inside": True,
                "point": {k: v for k, v in rule.evidence.items() if k != "killed"}}


def _both(inside: dict | None, point: dict | None) -> dict:
    """A completion's fault: the racer's own inside the call, with a requested one that came in the
    same call beside it (``with``), or whichever came."""
    if inside and point:
        return dict(inside, **{"with": point})
    return inside or point


def _served_by(evidence: dict, proc) -> bool:
    """The fault's point was in ``proc`` or in one of its children (``w0.1/f2``: its git, its program)."""
    return evidence["process"].split("/", 1)[0] == proc.name


class VirtualProgress(Progress):
    """The timed mode's progress line (``chaos.driver.Progress``: redrawn on a terminal, else a line every
    few seconds) on the schedule's clock: virtual seconds, ops, and how many of the run's exact fault
    points have come; past the time limit, what the run waits for. It only reads: the schedule, and so
    the history, is the same with it or without it."""

    def __init__(self, driver: DeterministicDriver, rules: list, time_limit: float):
        self.rules = rules      # the run's requested faults (the scheduler's own list is emptied at the end)
        self.phase: str | None = None
        super().__init__(driver, None, time_limit)

    def line(self) -> str:
        t = self.driver.now() / SEC_NS
        came = sum(1 for r in self.rules if r.evidence is not None)
        if self.phase is not None:
            where = f"{t:6.1f} virtual s  {self.phase}"
        elif t <= self.time_limit:
            where = f"{t:6.1f} virtual s / {self.time_limit:g} s"
        elif came < len(self.rules):
            where = f"{t:6.1f} virtual s  past the time limit: a requested fault's point is still to come"
        else:
            where = f"{t:6.1f} virtual s  past the time limit: finishing the ops under way"
        return f"chaos: {where}  ops {self.driver.ops}  faults {came} of {len(self.rules)}"
