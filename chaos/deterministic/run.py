"""``chaos run --deterministic``: one run whose history is a function of the seed.

Its own loop, beside ``chaos.runner.Run`` (which stays the timed mode): the
run dir, test.yaml, the target's provision and seed, the workload generator
and the checkers are the runner's; what differs is who runs the workers and
what time it is. One worker process per client thread
(``chaos.deterministic.worker``, single-threaded) runs under the scheduling
shim; ``workloads.interpreter.interpret`` drives the workload through
``DeterministicDriver``, whose clock is the scheduler's virtual clock and whose
``wait`` runs the scheduler (``Scheduler.run_until``) until a reply arrives or
the next op is due. The harness makes no wall-clock decision: the same seed,
program bytes and config give the same ``history.jsonl`` byte for byte;
``results.json`` records its sha256 (``history_sha256``) and the scheduler's
summary (PCT depth, points, change points, the trace's digest, every fault's
point).

Faults are exact: ``kill``, ``fsync`` (EIO), ``pause`` (a freeze),
``lost-reply``, ``power-loss`` and ``clock`` land at the n-th matching
scheduling point, n drawn from the seed (``fault_rules``); the completion of
the op in flight carries the point. The other nemeses are not built for this
mode yet and are refused up front, as is a backend whose ``deterministic``
ability is missing (``refusal``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict

from checkers.history import classify, final_state_records
from chaos.deterministic import trace as schedule
from chaos.deterministic.callfaults import STEP_CALLS, CallFaults
from chaos.deterministic.scheduler import FaultRule, Scheduler, SchedulerStuck
from chaos.deterministic.shim import EPOCH_NS
from chaos.errors import ExitCode
from chaos.faults.procs import descendants, kill_new_descendants
from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage
from chaos.store import RunDir, clean_stale_tmp
from chaos.watchdog import Guard
from workloads.generator import NEMESIS, clients, deadline
from workloads.interpreter import interpret

#: the nemeses this mode puts at exact points; the rest are refused (not built yet)
EXACT_FAULTS = ("kill", "fsync", "clock", "pause", "lost-reply", "power-loss", "restart")
#: what the deterministic mode runs when no ``--nemesis`` is given: the timed mode's default but
#: ``restart`` (a kill at an exact point already drops a worker's process state and reopens the store,
#: and cuts a call short besides)
DEFAULT_FAULTS = ("kill", "pause", "clock", "fsync", "lost-reply")
#: exact faults the scheduler makes by itself: the timed mode's tool for them (libfaketime, a worker
#: host's exit after commit) is not needed
SCHEDULER_FAULTS = ("clock", "pause", "lost-reply")
#: the calls a kill may land before: every change to the store and every lock step (one set with the
#: racers' own faults inside a call)
KILL_CALLS = STEP_CALLS
SYNC_CALLS = frozenset({"fsync", "fdatasync"})
#: a fault's point is the n-th match from this share (%) of the time limit on, drawn per fault
AFTER_PERCENT = (5, 60)
#: past its time limit the workload goes on while a requested fault has not landed yet (its point is
#: the n-th matching one after its instant: a short run may end before it), for at most the time limit
#: again or this much (virtual ns), whichever is longer; then the fault is missed and the run unknown
EXTEND_MIN_NS = 2_000_000_000
#: the calls a lost reply or a power cut may land at: changes to the store (not lock steps, which a
#: read-only call takes too: its reply is not one whose loss hides a change)
CHANGE_CALLS = KILL_CALLS - {"lock", "unlock", "flock"}
#: a freeze holds its thread's process this long (virtual ms), drawn as the timed pause draws its duration, but
#: at most a quarter of the time limit: a frozen lock holder stalls every other worker, and a freeze
#: as long as a short run would leave the other faults no points to land at
PAUSE_MS = (1000, 4000)
#: the scheduler's fault action -> the nemesis it serves (an errno is the fsync nemesis's)
NEMESIS_OF = {"kill": "kill", "freeze": "pause", "lost-reply": "lost-reply", "power-loss": "power-loss",
              "clock": "clock", "restart": "restart"}
#: a restart comes at the n-th op handed to a worker that has a process (n drawn up to this) from its instant on
RESTART_NTH = 10
#: PCT: bugs of this depth get a known chance per run (docs/deterministic.md); ``--pct-depth``
DEPTH = 3
#: the expected number of scheduling points per run, per worker and second of the time limit (at
#: least 1000): the clock fault's point is drawn over a quarter of it (``clock_rule``). PCT's change
#: points are virtual instants over the time limit (``Scheduler(horizon_ns=)``: runs differ tenfold in
#: points per second, sqlite's default 1,209 per worker-second, a Python mutant's 136), unless
#: ``--pct-points`` gives a count of points to draw them over
POINTS_PER_WORKER_SECOND = 400
#: virtual time per scheduling point and per call handed to a worker: virtual time moves by the schedule
#: only, and these keep its pace near a real call's (an agent loop paced by its calls' latency would
#: otherwise run thousands of cycles per virtual second)
STEP_NS = 50_000
CALL_NS = 1_000_000
SEC_NS = 1_000_000_000
CLOCK_MODES = ("backward", "forward")
#: a target's clock shows the step when its reply's wall_ms is this close to virtual time + offset
CLOCK_TOLERANCE_MS = 1000


def refusal(cfg) -> str | None:
    """Why this config cannot run deterministically (one line), or None."""
    from chaos import sut
    from chaos.runner import backend_options

    ability = sut.get(cfg.backend).abilities(backend_options(cfg))["deterministic"]
    if not ability.ok:
        return f"--deterministic: --backend {cfg.backend}: {ability.how}"
    if cfg.nodes != "local":
        return "--deterministic: --nodes docker is not built for it (the scheduler runs local processes)"
    timed = [n for n in cfg.nemesis if n not in EXACT_FAULTS]
    if timed:
        return (f"--deterministic: nemesis {', '.join(timed)} not built at exact points yet "
                f"(only {', '.join(EXACT_FAULTS)}; or --nemesis none)")
    if not (isinstance(cfg.pct_depth, int) and 1 <= cfg.pct_depth <= 100) or not (
            cfg.pct_points is None or (isinstance(cfg.pct_points, int) and 1 <= cfg.pct_points <= 10**9)):
        return "--deterministic: --pct-depth is an integer in [1, 100], --pct-points in [1, 1e9]"
    if cfg.faults is not None:
        return "--deterministic: an explicit timed fault list (faults:) has no meaning here; the seed places the faults"
    return None


def fault_rules(cfg, power=None) -> dict[str, list[FaultRule]]:
    """Per requested fault, two exact points drawn from the seed: the n-th point of a matching call
    from a virtual instant on (``AFTER_PERCENT`` of the time limit: every run reaches it, so the
    point comes in every run that still changes the store after it; a count of points from the
    start would miss in a run that makes fewer than drawn). The clock keeps its own draw.
    ``power`` (a ``PowerLoss`` journal of the store) is needed for ``power-loss``: its cut counts
    only points where a change is uncovered (a cut with nothing to undo would not take effect)."""
    rng = random.Random(f"faults:{cfg.seed}")
    limit_ns = int(cfg.time_limit * SEC_NS)

    def after() -> int:   # from a virtual instant the workload surely reaches, drawn over most of it
        return rng.randint(*AFTER_PERCENT) * limit_ns // 100
    rules: dict[str, list[FaultRule]] = {}
    for name in cfg.nemesis:
        if name == "kill":
            rules[name] = [FaultRule("kill", KILL_CALLS, nth=rng.randint(1, 20), after_ns=after()) for _ in range(2)]
        elif name == "fsync":
            rules[name] = [FaultRule("EIO", SYNC_CALLS, nth=rng.randint(1, 3), after_ns=after()) for _ in range(2)]
        elif name == "clock":
            rules[name] = [clock_rule(rng, cfg.workers, expected_points(cfg)) for _ in range(2)]
        elif name == "pause":
            lo, hi = cfg.nemesis_opts.get("pause_ms", PAUSE_MS)
            cap_ms = int(cfg.time_limit * 1000 / 4)
            rules[name] = [FaultRule("freeze", KILL_CALLS, nth=rng.randint(1, 20), after_ns=after(),
                                     hold_ns=min(int(rng.randint(lo, hi) * (cfg.scale or 1.0)), cap_ms) * 1_000_000)
                           for _ in range(2)]
        elif name == "lost-reply":
            rules[name] = [FaultRule("lost-reply", CHANGE_CALLS, nth=rng.randint(1, 20), after_ns=after(), when=in_call)
                           for _ in range(2)]
        elif name == "power-loss":
            rules[name] = [power_rule(rng, power, cfg.nemesis_opts.get("power_loss_mode", "drop"), after())
                           for _ in range(2)]
        elif name == "restart":   # no process makes a "restart" point: the driver matches it between two ops
            rules[name] = [FaultRule("restart", frozenset({"restart"}), nth=rng.randint(1, RESTART_NTH),
                                     after_ns=after()) for _ in range(2)]
    return rules


def in_call(thread) -> bool:
    """The point is inside a call the harness handed the worker (not its start-up): set by the run."""
    return thread.proc.serving


def power_rule(rng: random.Random, power, mode: str, after_ns: int) -> FaultRule:
    """One power cut: at the n-th change of the store from ``after_ns`` on made while another
    change is uncovered (every process killed there, then ``power.power_off`` undoes what no
    fsync covers)."""
    if mode == "mixed":
        mode = rng.choice(("drop", "torn"))
    seed = rng.randint(0, 2**31 - 1)
    rule = FaultRule("power-loss", CHANGE_CALLS, nth=rng.randint(1, 20), after_ns=after_ns,
                     when=lambda thread: bool(power.refresh()), then=lambda: power.power_off(mode, seed))
    rule.value = {"mode": mode, "seed": seed}
    return rule


def expected_points(cfg) -> int:
    """``--pct-points``, or the points a run is expected to make (``POINTS_PER_WORKER_SECOND``)."""
    return cfg.pct_points or max(1000, int(POINTS_PER_WORKER_SECOND * cfg.workers * cfg.time_limit))


def clock_rule(rng: random.Random, workers: int, points: int) -> FaultRule:
    """One clock step, drawn like the timed nemesis's (``chaos.nemesis.clock``: up to half the
    workers, backward or forward by one of its offsets; no strobe: it is a timer by nature) and
    placed at the n-th point of any process, n in 20..max(400, points / 4) (a quarter of the
    expected points: within the run even when it has half as many as expected). Every
    incarnation of a target's worker (``w<thread>.``) sees the step from that point until the heal."""
    from chaos.nemesis.clock import BACKWARD_S, FORWARD_S

    targets = sorted(rng.sample(range(workers), rng.randint(1, max(1, workers // 2))))
    mode = rng.choice(CLOCK_MODES)
    offset_s = rng.choice(BACKWARD_S if mode == "backward" else FORWARD_S)
    rule = FaultRule("clock", nth=rng.randint(20, max(400, points // 4)),
                     offsets={f"w{t}.": offset_s * SEC_NS for t in targets})
    rule.value = {"targets": targets, "mode": mode, "offset_s": offset_s}
    return rule


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


def took_effect(rule: FaultRule, clock_took: bool | None) -> bool:
    """Whether a fault that came took effect. At an exact point a kill, an EIO and a freeze do;
    a clock step once a target's own clock showed it (as in the timed mode); a lost reply once
    the reply of the call it was in was dropped (not when the worker died first); a power cut
    once it undid an uncovered change."""
    if rule.action == "clock":
        return clock_took is True
    if rule.action == "lost-reply":
        return bool(rule.evidence.get("reply_dropped"))
    if rule.action == "power-loss":
        return rule.evidence.get("undone", 0) > 0
    return True


def power_journal(cfg, target, run_dir):
    """The power-loss journal of the target's durable store (``chaos.faults.powerloss``) when
    ``power-loss`` is asked for: the workers run with its preload after the scheduling shim's."""
    if "power-loss" not in cfg.nemesis:
        return None
    from chaos.faults.powerloss import PowerLoss
    from chaos.nemesis.power import durable_prefix

    return PowerLoss(run_dir.tmp, durable_prefix(target))


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def history_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cfg, report: bool = True, config_path: str | None = None, exact_rules=None) -> int:
    """One deterministic run; the exit code is the verdict (0 valid, 1 invalid, 2 unknown).
    ``config_path``: the test.yaml it re-runs (its run's history digest is compared). ``exact_rules``
    (fault name -> its ``FaultRule`` list, or a function of the run's power-loss journal, None
    unless ``power-loss`` is asked for, giving it) replaces the seed's draw (``fault_rules``): the
    crash points of ``chaos explore`` name their exact kill, EIO or power cut."""
    from chaos.runner import take_set_up
    from chaos.workload_kinds import workload_kind
    from workloads.generator import SEC

    previous = previous_history(config_path)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    if cfg.scale is None:
        cfg.scale = 1.0     # virtual time: nothing to calibrate against the machine
    clean_stale_tmp(os.path.abspath(cfg.store))
    run_dir = RunDir(cfg.store, cfg.name)   # its tmp/ made with its .owner: a killed run's is swept by the next start
    guard = Guard(run_dir.tmp)   # and by its watchdog at once, its workers killed, even after a SIGKILL of this one
    kind = workload_kind(cfg)
    notes: list[str] = []
    prepare_for_backend(kind, cfg, notes)
    run_dir.write_yaml("test.yaml", asdict(cfg))
    client_gen, world = kind.build(cfg)
    target = kind.target(cfg, run_dir, guard.note_pid, guard.note_dir)
    history = HistoryWriter(run_dir.file("history.jsonl"))
    power, rules = None, {}
    coverage = Coverage(cfg.nemesis)
    # change points at virtual instants over the time limit (any store's pace), or over --pct-points steps
    horizon = None if cfg.pct_points else int(cfg.time_limit * SEC)
    sched = Scheduler(cfg.seed, prefixes=[run_dir.path], depth=cfg.pct_depth, expected_points=expected_points(cfg),
                      horizon_ns=horizon, step_ns=STEP_NS, send_ns=CALL_NS, log_dir=run_dir.file("logs"),
                      sock_dir=run_dir.tmp)
    children_before = descendants()   # (the watchdog's; the scheduler made this process the subreaper)
    clock_took, stuck, final_incomplete, driver, interrupted = None, None, [], None, False
    wall0 = time.monotonic()
    # SIGTERM ends the run like Ctrl-C: everything reaped. Only the main thread may set a handler: a run in
    # another thread (a cluster worker's task thread: chaos explore's explore_one) leaves its process's alone
    main = threading.current_thread() is threading.main_thread()
    # (SIGINT too: a parent that ignores it, a shell's background job or a test runner, would leave it ignored)
    old_handlers = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        with setup_programs_virtual():
            target.setup(kind.namespaces(world), kind.durable(world))
        take_set_up(cfg, target, notes)
        file_times_at_epoch(run_dir.path)
        client_gen, world = adapt_to_target(kind, cfg, target, world, notes, run_dir, client_gen)
        power = power_journal(cfg, target, run_dir)   # (the store's path is known once it is set up)
        rules = (fault_rules(cfg, power) if exact_rules is None
                 else exact_rules(power) if callable(exact_rules) else exact_rules)
        sched.faults = [r for rs in rules.values() for r in rs]
        driver = DeterministicDriver(sched, history, target.spec, run_dir.file("logs"),
                                     power.env() if power is not None else None, cfg.op_timeout, guard.note_pid)
        threads = list(range(cfg.workers))
        limit_ns = int(cfg.time_limit * SEC)
        extended = [limit_ns]

        def armed(op) -> bool:   # an op past the time limit still starts while a fault waits for its point
            go = op["time"] < limit_ns + max(limit_ns, EXTEND_MIN_NS) and any(r.evidence is None for r in sched.faults)
            if go:
                extended[0] = max(extended[0], op["time"])
            return go
        process_of = interpret(clients(deadline(limit_ns, client_gen, keep=armed)), threads, driver, cfg.seed)
        if extended[0] > limit_ns:
            notes.append(f"the workload started ops until {(extended[0] - limit_ns) / SEC:.2f} virtual s past its "
                         f"time limit, until the requested faults had their points")
        driver.record_clock_faults()   # a step at the workload's last point is recorded before its heal
        clock_took = driver.heal_clocks()   # healed at the end, as the timed nemesis's final reset
        sched.faults, sched.call_faults = [], []   # the final phase is not faulted: a rule left unfired is missed
        for proc in list(driver.procs.values()):
            sched.kill(proc)        # fresh workers for the read-back, as the timed mode does
        sched.replies.clear()
        sched.vt += int(kind.settle_s(cfg) * SEC)   # every lease expires (virtually)
        ops = history.snapshot()
        start = len(ops)

        def call(client_ops: list[dict], phase: str | None = None) -> None:   # the kind's final ops, each to completion
            interpret(clients(client_ops), threads, driver, cfg.seed, process_of=process_of)
        kind.final_phase(cfg, world, ops, call)
        final_incomplete = [f"final read-back {o['f']} ended info: {_info_reason(o)}" for o in history.snapshot()[start:]
                            if o["type"] == "info"]
        for proc in list(driver.procs.values()):
            sched.kill(proc)
        for rec in final_state_records(target.export()):
            history.append(dict(rec, time=sched.vt))
    except SchedulerStuck as e:
        stuck = str(e)   # the run ends where the scheduler could not go on: an unknown verdict, its schedule kept
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: what ran is kept and said, unchecked, as the timed mode does
        interrupted = True
    finally:
        sched.faults = [r for rs in rules.values() for r in rs]
        summary = sched.summary()
        if driver is not None:   # the racers' faults inside calls: asked for and landed, per kind
            summary["call_faults"] = driver.calls.summary()
        schedule.write(run_dir.path, sched.trace)
        sched.close()
        target.close()
        kill_new_descendants(children_before, run_dir.path)   # what a set-up program left (a daemonized child)
        history.close()
        if power is not None:
            power.cleanup()
        guard.close()
        shutil.rmtree(run_dir.tmp, ignore_errors=True)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    for name, rs in rules.items():
        for r in rs:
            if r.evidence is not None:   # a fault that never came is missed: not fired
                coverage.fired(name, took_effect(r, clock_took))
    results, wall = _results(cfg, kind, world, target, history, coverage, notes, summary, final_incomplete,
                             "interrupted (Ctrl-C or SIGTERM)" if interrupted else stuck, interrupted)
    results["history_sha256"] = history_sha256(run_dir.file("history.jsonl"))
    if previous is not None:
        results["reproduced"] = {"of": previous, "same_history": previous == results["history_sha256"]}
    run_dir.write_json("results.json", results)
    from chaos.runner import publish_run

    run_dir.write_json("wall.json", dict(wall, run_dir=run_dir.path, wall_s=round(time.monotonic() - wall0, 3),
                                         started_at=started))
    publish_run(run_dir, report)
    from chaos.reports.console import summary as console_summary

    print(f"chaos: deterministic: seed {cfg.seed}, PCT depth {summary['depth']}, {summary['points']} scheduling "
          f"points, {results['stats']['ops']} ops in {summary['virtual_ns'] / SEC:.1f} virtual s "
          f"({time.monotonic() - wall0:.1f} wall s), history sha256 {results['history_sha256'][:16]}", file=sys.stderr)
    if previous is not None:
        same = previous == results["history_sha256"]
        print(f"chaos: deterministic: {'reproduced' if same else 'NOT reproduced'}"
              f" the history of the run this config came from (sha256 {previous[:16]})", file=sys.stderr)
        if not same:
            print(schedule.compare_runs(os.path.dirname(os.path.abspath(config_path)), run_dir.path), file=sys.stderr)
    sys.stderr.flush()   # the verdict summary is stdout's, last (as chaos.runner prints it)
    print(console_summary(dict(results, run_dir=run_dir.path), run_dir.path), flush=True)
    return 130 if interrupted else results["exit_code"]


def _info_reason(op: dict) -> str:
    """Why an op ended info, in one bounded line: the harness's error, else the reply's (a black box's
    exit 1 with an envelope: Wowbagger's ``git-failed`` behind a stale ``index.lock``, say)."""
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    envelope = value.get("envelope") if isinstance(value.get("envelope"), dict) else {}
    return str(op.get("error") or envelope.get("error") or f"exit {value.get('exit')}")[:160]


class setup_programs_virtual:
    """While the target is set up, every program the harness starts (git init, a black-box program's
    provision, the seeding commit) runs with the shim alone (``shim.alone_env``): the virtual epoch on
    its clocks and seeded randomness, so a namespace it mints and a commit's hash are the same in every
    run, and in the run's stable environment (``shim.stable_env``: the same whatever shell or directory
    the harness was started from). The harness's own process is not affected (a preload applies to new
    processes only; its environment is whole again once the set-up is done)."""

    def __enter__(self):
        from chaos.deterministic.shim import alone_env, stable_env

        self.saved = dict(os.environ)
        stable = {**stable_env(), **alone_env("setup", threads=True)}
        os.environ.clear()
        os.environ.update(stable)
        return self

    def __exit__(self, *exc):
        os.environ.clear()
        os.environ.update(self.saved)


def file_times_at_epoch(root: str) -> None:
    """Every file and directory the set-up left under ``root`` gets the virtual epoch as its times: the
    set-up's programs run outside the scheduler, so their files carry real times, and git decides whether
    to read a worktree file again by comparing them (sched.c, "file times")."""
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            os.utime(os.path.join(base, name), ns=(EPOCH_NS, EPOCH_NS), follow_symlinks=False)
    os.utime(root, ns=(EPOCH_NS, EPOCH_NS))


def prepare_for_backend(kind, cfg, notes: list) -> None:
    """What the timed runner's ``kind.prepare`` leaves out up front (racer episodes needing an ability
    the backend lacks: a black box cannot seed a claim record), recorded in ``cfg`` before test.yaml."""
    from chaos import sut
    from chaos.runner import backend_options

    kind.prepare(cfg, sut.get(cfg.backend).abilities(backend_options(cfg)), notes)


def adapt_to_target(kind, cfg, target, world, notes: list, run_dir, client_gen):
    """What a black-box target turned out to be (the namespaces it minted, no public item path: no
    publications; ``black_box_world`` of the claims kind, as the timed runner's ``adapt`` without its
    calibration: virtual time has nothing to calibrate), recorded in test.yaml; the workload rebuilt."""
    adapt = getattr(kind, "black_box_world", None)
    if adapt is None:
        return client_gen, world
    before = asdict(cfg)
    client_gen, world = adapt(cfg, target, world, notes)
    if asdict(cfg) != before:
        run_dir.write_yaml("test.yaml", asdict(cfg))
    return client_gen, world


def previous_history(config_path: str | None) -> str | None:
    """The history digest of the run a ``--config RUN/test.yaml`` came from (its results.json), if any."""
    if not config_path:
        return None
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(config_path)), "results.json")) as f:
            digest = json.load(f).get("history_sha256")
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) else None


#: what a checker result says about wall time (moved to wall.json: results.json holds only virtual times)
WALL_FIELDS = ("seconds", "cpu_seconds")


def _readers(files: dict[str, dict]) -> str:
    """``{path: {"processes", "first"}}`` said in a line, files read by the same processes together:
    "/proc/meminfo, /sys/fs/cgroup/ by w0.0/f1, w0.1/f1 and 53 more"."""
    by: dict[tuple, list[str]] = {}
    for path, r in files.items():
        by.setdefault((r["processes"], tuple(r["first"])), []).append(path)
    return "; ".join(f"{', '.join(paths)} by {', '.join(first)}"
                     + (f" and {n - len(first)} more" if n > len(first) else "") for (n, first), paths in by.items())


def _without_wall(obj, path: str, wall: dict):
    """``obj`` without its wall-clock members (``WALL_FIELDS``, at any depth); they go to ``wall``
    under their dotted path."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in WALL_FIELDS:
                wall[f"{path}.{k}"] = v
            else:
                out[k] = _without_wall(v, f"{path}.{k}", wall)
        return out
    if isinstance(obj, list):
        return [_without_wall(v, f"{path}.{i}", wall) for i, v in enumerate(obj)]
    return obj


def _results(cfg, kind, world, target, history, coverage, notes, summary, final_incomplete,
             stuck: str | None = None, interrupted: bool = False) -> tuple[dict, dict]:
    """(results.json, wall.json): the first without a wall-clock field or the run dir's path, so
    equal runs give equal files; the second with what the wall clock said. ``notes`` are the set-up's
    (racer episodes left out, what a black box turned out to be): said, as the timed mode says them,
    not a reason for ``unknown``; ``final_incomplete`` (a final read-back that ended info) is one.
    ``stuck``: why the scheduler could not go on; the history stops there, without its final phase,
    so it is not checked (a checker owed a read-back would cry wolf) and the verdict is ``unknown``;
    so too for a run ``interrupted`` (``stuck`` then says by what)."""
    from chaos.reports.evidence import evidence
    from chaos.runner import Run, op_stats

    ops = history.snapshot()
    stats = op_stats(ops)
    ctx = kind.ctx(cfg, world, target.capabilities)
    deviations = list(getattr(target, "known_deviations", None) or [])   # a profile's acknowledged findings
    if deviations:
        ctx["known_deviations"] = deviations
    if stuck is not None:
        summary = dict(summary, stuck=stuck, faults=[   # a fault whose point the run never got to was not missed
            {k: v for k, v in f.items() if k != "missed"} | ({"cut_off": True} if f.get("missed") else {})
            for f in summary["faults"]])
        merged = {"valid": "unknown", "checkers": {}}
        where = "" if interrupted else ", where the scheduler could not go on"
        notes = notes + [f"the run stopped at {summary['virtual_ns'] / 1e9:.3f} virtual s{where}: {stuck}; its "
                         f"history is incomplete and was not checked (its schedule up to there is schedule.trace.gz)"]
    else:
        merged = kind.check(ops, ctx)
    v = merged.get("valid")
    verdict = "valid" if v is True else "invalid" if v is False else "unknown"
    notes = notes + final_incomplete
    if verdict == "valid" and final_incomplete:
        verdict = "unknown"
    missing = coverage.missing()
    if missing and verdict == "valid":
        verdict = "unknown"
        notes.append(f"requested faults never took effect: {', '.join(missing)}")
    # said, not a reason for unknown: reading decides nothing by itself
    for key, what, may_differ in (
            ("clock_files", "read the machine's clock through files the shim cannot make virtual",
             "a decision made on what they read may differ between runs of this seed"),
            ("machine_files", "read what the machine has through files the shim does not control",
             "what they say may differ on another machine or at another moment (free memory, load), and a "
             "decision made on it (the size of a heap, of a pool) with it"),
            ("cpu_clocks", "read clocks the shim does not make virtual",
             "how long a process or thread ran differs from run to run, and a decision made on it with it"),
            ("timers", "set timers that fire by the machine's clock, not the schedule's",
             "when one fires, and what the program does then, may differ between runs of this seed")):
        if summary.get(key):
            notes.append(f"{what} ({_readers(summary[key])}): {may_differ}")
    if summary["notes"] and verdict == "valid":
        verdict = "unknown"
        notes.append("the scheduler saw concurrency it did not serialize: " + "; ".join(summary["notes"][:3]))
    paths = kind.coverage(ops, cfg, target.capabilities)
    if stuck is None:
        verdict = Run._workload_gate(verdict, paths, stats, notes)
    code = {"valid": ExitCode.VALID, "invalid": ExitCode.INVALID}.get(verdict, ExitCode.UNKNOWN)
    # a run that stopped early is measured up to where it stopped (a stall to the time limit it never
    # reached would be of its own making)
    measured_s = cfg.time_limit if stuck is None else min(cfg.time_limit, summary["virtual_ns"] / SEC_NS)
    wall: dict = {}
    checkers = _without_wall(merged.get("checkers", {}), "checkers", wall)
    return {"schema_version": 1,
            "test": {"name": cfg.name, "backend": cfg.backend, "workload": cfg.workload, "nemesis": list(cfg.nemesis),
                     "workers": cfg.workers, "time_limit": cfg.time_limit, "seed": cfg.seed, "command": cfg.command},
            "capabilities": target.capabilities, "verdict": verdict, "exit_code": int(code),
            "checkers": checkers, "fault_coverage": coverage.to_json(), "workload_coverage": paths,
            "evidence": evidence(ops, measured_s, paths), "stats": stats, "ctx": ctx, "notes": notes,
            "known_deviations": merged.get("known_deviations", []),
            "deterministic": summary}, wall
