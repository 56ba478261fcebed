"""``chaos run``: one test run, from a resolved config to a verdict.

The steps (design.md, "Data flow of one run"): make the run directory, seed the
store through the backend's privileged path, plan the schedule (pure function
of seed + config, written to ``schedule.jsonl``), start a watchdog and N worker
host processes by exec with the preload env, interpret the client and nemesis
generators in real time (every invoke and completion appended to
``history.jsonl`` as it happens), then the final phase: heal every fault, let
leases expire, run the workload kind's own final phase (the claims kind reads
every tuple and every publication outcome back), record the durable export,
run the kind's checkers and write ``results.json``. The runner names no
workload: what differs between workloads is asked of the run's kind
(``chaos.workload_kinds.base.WorkloadKind``), as what differs between
backends is asked of its ``Sut``.

``results.json`` (schema_version 1), read by ``chaos.reports``::

    {"schema_version": 1,
     "test": {"name", "backend", "workload", "nemesis": [...], "workers",
              "time_limit", "seed", "command"},
     "capabilities": <the capabilities envelope, or null>,
     "verdict": "valid" | "invalid" | "unknown",
     "exit_code": 0 | 1 | 2,
     "checkers": {name: {"valid": ..., ...}},
     "fault_coverage": {fault: {"requested": bool, "fired": int, "took_effect": int}},
     "stats": {"ops", "ok", "fail", "info", "duration_s"},
     "started_at", "finished_at" (UTC ISO-8601), "run_dir",
     "notes": [plain-language reasons for an unknown verdict, ...],
     "target": {"backend", "spec", ...: the system under test (chaos.sut),
                for postgres also "schema", "own_server", "through_proxy",
                "server_dir", "postmaster_pids"}}

The system under test comes from its backend object (``chaos.sut.get(cfg.backend)``). Every client completion in the history carries
``wall_ms``: the worker's own ``time.time()`` at its reply.

A requested fault that never took effect makes an otherwise valid run
``unknown``. Ctrl-C / SIGTERM stop the run early (verdict ``unknown``, exit
130); the history written so far stays on disk and every process is killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from chaos.driver import FaultEnv, NemesisExecutor, Progress, RealDriver
from backends.api import StoreUnavailable
from backends.factory import UnknownBackend
from chaos.errors import ExitCode, SetupFailed, UsageError
from chaos.faults import procs
from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage, compose_packages
from chaos.store import RunDir, clean_stale_tmp
from chaos.watchdog import Guard
from chaos.faults.incall import Rendezvous
from chaos.worker import ReleaseTally, Slot
from chaos.workload_kinds import workload_kind
from checkers.history import final_state_records
from workloads.generator import (NEMESIS, PENDING, SEC, Gen, any_of, clients, lift, nemesis as on_nemesis,
                                 op_of, update_of)
from workloads.interpreter import interpret, simulate


def grace_ns(cfg) -> int:
    """How long the workload may go on past its time limit for an armed fault to
    take effect: as long again as the run, or three op deadlines (the armed
    worker's op in flight, its next acquire and its publish: on a loaded machine
    one claim cycle is all it may get in a short run), whichever is longer;
    5 s at least, 60 s at most. It ends as soon as the evidence is in."""
    return int(min(max(cfg.time_limit, 3 * cfg.op_timeout, 5.0), 60.0) * SEC)


def rotation_ns(cfg) -> int:
    """How long past its time limit a run may go on for the racers to
    exercise every episode kind (``UntilProven``): as long again as
    the run, within the grace, so a machine running at half its calibrated
    speed still starts every kind. Not for a run shorter than the default
    time limit: one that short (a CI gate, a test) was made short on purpose,
    and keeps its length."""
    return min(int(cfg.time_limit * SEC), grace_ns(cfg)) if cfg.time_limit >= RunConfig.time_limit else 0


def extended_for(why: set, cfg) -> str:
    """The note's reason for a run that went on past its time limit."""
    parts = []
    if "faults" in why or "rotation" not in why:   # (an op due past the limit was planned before it)
        parts.append(f"armed faults could take effect (at most {grace_ns(cfg) / SEC:.0f} s)")
    if "rotation" in why:
        parts.append(f"the racers could exercise every episode kind "
                     f"(at most {rotation_ns(cfg) / SEC:.0f} s, with no agent starting a call)")
    return "so that " + " and ".join(parts)


@dataclass(frozen=True)
class UntilProven(Gen):
    """The client ops of ``gen`` before ``limit``; past it, only while
    ``unproven()`` names a requested fault that fired, is armed and has not
    taken effect yet (a lost reply waits for the armed worker's next commit),
    and never past ``limit + grace``. The nemesis stops at ``limit``: no new
    fault starts in the extension, so it only lets what fired happen.

    With ``rotation`` (ns), also while an episode kind of the racers'
    rotation has not been exercised (``gen.rotation_left``: not ended, or
    ended only by faults taking its prologue), for at most ``rotation`` past the limit,
    with only the racers going on (``gen.finish_rotation``): on a shared
    machine a process-per-call program's calls can take twice their
    calibrated time for minutes, and a run whose time limit ended the first
    pass reached 16-30 of the 39 kinds and missed the planted bug whose
    episode never started (epoch-wraps, signed-epochs, CLI, docs/mutants.md
    session 9); a slow stretch now costs time, not coverage. ``why``
    collects what the extensions were for ("faults", "rotation")."""

    gen: Any
    limit: int
    grace: int
    unproven: Callable
    rotation: int = 0
    why: set = field(default_factory=set, compare=False)   # what the run went on past its limit for

    def op(self, ctx):
        gen, end = self.gen, self.limit + self.grace
        if ctx.time >= self.limit:
            if ctx.time >= end:
                return None
            if self.unproven():
                self.why.add("faults")
            elif (self.rotation and ctx.time < self.limit + self.rotation
                  and getattr(gen, "rotation_left", None) and gen.rotation_left(ctx)):
                gen, end = gen.finish_rotation(), min(end, self.limit + self.rotation)
                self.why.add("rotation")
            else:
                return None
        res = op_of(gen, ctx)
        if res is None or res is PENDING:
            return res
        if res[0]["time"] >= end:
            return None
        return res[0], replace(self, gen=res[1])

    def update(self, ctx, event):
        from chaos.replyview import workload_view   # a program may print any JSON: the workload gets it typed

        return replace(self, gen=update_of(self.gen, ctx, workload_view(event)))


HEAL_ORDER = ("fsync", "lost-reply", "partition", "pause", "clock", "kill", "restart", "power-loss")


@dataclass
class RunConfig:
    """A test run as plain data (everything ``test.yaml`` records)."""

    name: str = "claims"
    backend: str = "sqlite"
    workload: str = "claims"
    nemesis: list = field(default_factory=list)
    workers: int = 10
    time_limit: float = 30.0
    seed: int = 0
    store: str = "store"
    op_timeout: float = 8.0
    claims: dict = field(default_factory=dict)       # ClaimsConfig overrides
    issuelock: dict = field(default_factory=dict)    # IssueLockConfig overrides (--workload issue-lock)
    nemesis_opts: dict = field(default_factory=dict)  # FaultCycle timing overrides, pause_at
    scenario: str | None = None
    command: str = ""
    fsync_history: bool = False
    dsn: str | None = None          # postgres: the user's server (else we start our own)
    profile: str | None = None      # external: the profile YAML
    backend_command: str | None = None  # external: the contract CLI command line
    factory: str | None = None      # python: "module:function" of an outside backend class
    # an explicit fault schedule, replacing the seeded one: [{"time": ns, "f", "value"}, ...] in time
    # order, heals included (``chaos shrink`` writes reduced ones; the packages still come from ``nemesis``)
    faults: list | None = None
    scale: float | None = None      # lease/work/deadline scale (None: measured at start, chaos.timing)
    auto_workers: bool = False      # workers / time_limit / op_timeout were defaults: scaled with the latency
    auto_time_limit: bool = False
    auto_op_timeout: bool = False
    timing: dict = field(default_factory=dict)  # what chaos.timing measured and chose
    nodes: str = "local"            # "docker": server and workers in containers (chaos.nodes.docker)
    docker_host: str | None = None  # the daemon (default: $DOCKER_HOST, else the local socket)
    node_memory: str | None = None  # docker resource limits on every container ("256m")
    node_cpus: float | None = None
    deterministic: bool = False     # chaos.deterministic: one scheduler, virtual time, same seed -> same history
    pct_depth: int = 3              # deterministic: PCT depth (change points + 1) and expected scheduling points
    pct_points: int | None = None


def nemesis_opts(cfg: RunConfig) -> dict:
    """What the nemesis packages are built from (pure data of the config)."""
    return dict(cfg.nemesis_opts, workers=cfg.workers, backend=cfg.backend, scale=cfg.scale or 1.0,
                **backend_options(cfg))


def backend_options(cfg: RunConfig) -> dict:
    """The backend's own options (``chaos.sut.base.OPTIONS``) of a run."""
    from chaos.workload_kinds import workload_kind

    return {"dsn": cfg.dsn, "command": cfg.backend_command, "profile": cfg.profile, "factory": cfg.factory,
            "nodes": None if cfg.nodes == "local" else cfg.nodes, "protocol": workload_kind(cfg).protocol}


def nemesis_plan(cfg: RunConfig):
    """(nemesis generator, executor table, packages) of a run: the packages of
    ``cfg.nemesis``, generating their seeded schedule, or exactly ``cfg.faults``;
    no fault starts at or after the time limit, and every one that started is healed."""
    limit = int(cfg.time_limit * SEC)
    gen, table, pkgs = compose_packages(cfg.nemesis, nemesis_opts(cfg), until=limit)
    if cfg.faults is not None:
        unknown = sorted({o["f"] for o in cfg.faults} - set(table))
        if unknown:
            raise UsageError(f"faults: {', '.join(unknown)} not among the nemeses {cfg.nemesis}")
        heal = {f for f, p in table.items() if p.name != f}
        ops = [{"f": o["f"], "value": o["value"], "time": min(int(o["time"]), limit) if o["f"] in heal else int(o["time"])}
               for o in cfg.faults if int(o["time"]) < limit or o["f"] in heal]
        gen = on_nemesis(lift(ops)) if ops else None
    return gen, table, pkgs


def plan_schedule(cfg: RunConfig, cycles_per_worker: int = 40) -> list[dict]:
    """The planned schedule: every nemesis op (time, f, value) and the first
    cycles of each worker (item, work, backoff). A pure function of seed + config."""
    rows = []
    gen, _, _ = nemesis_plan(cfg)
    if gen is not None:
        for op in simulate(gen, seed=cfg.seed, workers=cfg.workers):   # the plan ends at the time limit itself
            if op["type"] == "invoke":
                rows.append({"kind": "nemesis", "time": op["time"], "f": op["f"], "value": op["value"]})
    kind = workload_kind(cfg)
    _, world = kind.build(cfg)
    return rows + kind.plan(cfg, world, cycles_per_worker)


class Run:
    def __init__(self, cfg: RunConfig, report: bool = True):
        self.cfg = cfg
        self.report = report            # False: no report.html (``chaos run --no-report``)
        self.stop = threading.Event()
        self.interrupted = False
        self.stopped_at_s: float | None = None   # interrupted: where the workload stopped (its clock)
        self.slots: list[Slot] = []
        self.cleanups: list = []
        self.final_incomplete: list[str] = []  # why the final durable check could not run (-> unknown)
        self.known_deviations: list[dict] = []  # acknowledged findings (the profile's known_deviations)

    # ------------------------------------------------------------------ setup

    def _watchdog(self, run: RunDir) -> None:
        self.guard = Guard(run.tmp, self.cfg.dsn)   # (a secret DSN stays off disk)
        self.pidfile = self.guard.pidfile
        self._note_pid, self._note_dir = self.guard.note_pid, self.guard.note_dir
        self.cleanups.append(self.guard.close)

    def _faults(self, run: RunDir, target):
        clock_faults, fsync, power = {}, None, None
        from chaos import sut

        abilities = sut.get(self.cfg.backend).abilities(backend_options(self.cfg))
        if "fsync" in self.cfg.nemesis and abilities.has("fsync", via="workers"):  # else: the server's own shim
            from chaos.faults.failsync import FsyncFault

            fsync = FsyncFault(os.path.join(run.tmp, "failsync"))
            self.cleanups.append(fsync.cleanup)
        if "clock" in self.cfg.nemesis:
            from chaos.faults.faketime import ClockFault

            for t in range(self.cfg.workers):
                clock_faults[t] = ClockFault(os.path.join(run.tmp, f"clock-{t}"))
        self.release_freezes, self.fault_notes = {}, []
        if "frozen-publish" in workload_kind(self.cfg).episodes(self.cfg):   # its freeze lands at the end of a write transaction
            from chaos.faults.lockfreeze import WriteReleaseFreeze

            try:
                self.release_freezes = {t: WriteReleaseFreeze(os.path.join(run.tmp, f"lockfreeze-{t}"))
                                        for t in range(self.cfg.workers)}
            except RuntimeError as e:   # no gcc: said, and the freeze lands at its seeded time point
                self.fault_notes.append(f"frozen-publish freezes at a seeded time point, not after a write "
                                        f"transaction: {e}")
        if "power-loss" in self.cfg.nemesis:
            from chaos.faults.powerloss import PowerLoss
            from chaos.nemesis.power import durable_prefix

            power = PowerLoss(os.path.join(run.tmp, "powerloss"), durable_prefix(target))
            self.cleanups.append(power.cleanup)

        def env_for(t: int) -> dict:
            from chaos.host.server import PIN_DIR_ENV

            env: dict = {PIN_DIR_ENV: run.tmp}  # a black-box pin's timestamp file lives (and dies) with the run
            libs = []
            if t in clock_faults:
                env.update(clock_faults[t].env())
                libs.append(clock_faults[t].library)
            if fsync is not None:
                env.update(fsync.env())
                libs.append(fsync.library)
            if power is not None:  # after failsync: a sync that failsync fails is never marked durable
                env.update(power.env())
                libs.append(power.library)
            if t in self.release_freezes:
                env.update(self.release_freezes[t].env())
                libs.append(self.release_freezes[t].library)
            if libs:
                env["LD_PRELOAD"] = " ".join(libs)
            return env
        return clock_faults, fsync, power, env_for

    def _routes(self, target):
        """Per-worker proxies for the partition nemesis (a server reached over TCP)."""
        if "partition" not in self.cfg.nemesis:
            return None
        from chaos.nemesis.partition import Routes

        if target.proxy is not None:       # lost-reply too: worker -> its route -> the reply-dropping proxy
            upstream = ("127.0.0.1", target.proxy.port)
        else:
            upstream = target._tcp_target()
        routes = Routes(upstream, self.cfg.workers)
        self.cleanups.append(routes.close)
        return routes

    def _on_signal(self, signum, _frame) -> None:
        self.interrupted = True
        self.stop.set()

    # ------------------------------------------------------------------ run

    def execute(self) -> int:
        cfg = self.cfg
        procs.set_child_subreaper()
        self.children_before = procs.descendants()
        clean_stale_tmp(os.path.abspath(cfg.store))
        run = RunDir(cfg.store, cfg.name)
        self._watchdog(run)  # first: from here on a SIGKILL of this process leaves nothing behind
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        from chaos.sut.base import redact_dsn

        run.write_yaml("test.yaml", dict(asdict(cfg), dsn=redact_dsn(cfg.dsn)))
        run.write_jsonl("schedule.jsonl", plan_schedule(cfg))
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        history = HistoryWriter(run.file("history.jsonl"), fsync=cfg.fsync_history)
        coverage = Coverage(cfg.nemesis)
        notes: list[str] = []
        results = None
        try:
            kind = workload_kind(cfg)
            target, client_gen, world = self._set_up(kind, run, notes)
            capabilities = target.capabilities
            clock_faults, fsync, power, env_for = self._faults(run, target)
            notes.extend(self.fault_notes)
            t0 = time.monotonic_ns()
            driver = RealDriver(history, self.slots, None, t0, self.stop)
            routes = self._routes(target)
            self._add_slots(run, target, routes, env_for, driver)
            env = FaultEnv(self.slots, clock_faults, fsync, coverage, history, t0, target)
            env.power, env.routes = power, routes
            self._workload(kind, world, client_gen, driver, env, coverage, history, notes)
            final_state = None
            if not self.interrupted:
                try:
                    final_state = target.export()
                    for rec in final_state_records(final_state):  # split: no reader holds one huge line
                        history.append(dict(rec, time=driver.now()))
                except Exception as e:
                    self.final_incomplete.append(f"final durable export failed: {type(e).__name__}: {e}")
            ops = history.snapshot()
            self._in_call_evidence(coverage, ops)
            results = self._results(cfg, run, ops, coverage, capabilities, started, notes, world, kind)
            results["target"] = target.describe()
            landed = kill_landings(ops)
            if landed and "kill" in results["fault_coverage"]:
                results["fault_coverage"]["kill"]["during"] = landed
        finally:
            self._teardown()
            for s, h in old.items():
                signal.signal(s, h)
            history.close()
        run.write_json("results.json", results)
        publish_run(run, self.report)
        if results.get("workload_coverage"):  # per path; the summary below says how many completed
            from workloads.coverage import format_table

            print("chaos: workload coverage\n" + format_table(results["workload_coverage"]), file=sys.stderr)
        from chaos.reports.console import summary

        sys.stderr.flush()   # the verdict summary is stdout's, last (progress and logs are stderr's)
        print(summary(results, run.path), flush=True)
        if self.interrupted:
            return 130
        return results["exit_code"]

    def _workload(self, kind, world, client_gen, driver: RealDriver, env: FaultEnv, coverage: Coverage,
                  history: HistoryWriter, notes: list) -> None:
        """The workload and its nemesis until the time limit, and past it while an armed fault's evidence
        is still to come (``UntilProven``); then, unless interrupted, the kind's final phase. The progress
        line runs meanwhile."""
        cfg = self.cfg
        nem_gen, table, pkgs = nemesis_plan(cfg)
        driver.nemesis = NemesisExecutor(table, env, driver.completions)
        limit = int(cfg.time_limit * SEC)
        waiting = [p for p in pkgs if p.waiting is not None]

        def unproven() -> list[str]:  # faults armed whose evidence is still to come
            missing = coverage.missing()
            return [p.name for p in waiting if p.name in missing and p.waiting(env)]
        until = UntilProven(client_gen, limit, grace_ns(cfg), unproven, rotation_ns(cfg))
        gen = clients(until)
        if nem_gen is not None:
            gen = any_of(gen, nem_gen)
        threads = list(range(cfg.workers)) + [NEMESIS]
        progress = Progress(driver, coverage, cfg.time_limit)
        try:
            process_of = interpret(gen, threads, driver, cfg.seed)
            if self.interrupted:
                self.stopped_at_s = driver.now() / SEC
            workload_ops = history.snapshot()
            last = max((o["time"] for o in workload_ops if o["type"] == "invoke" and o["process"] != NEMESIS),
                       default=0)
            if last > limit and not self.interrupted:
                notes.append(f"the workload started ops until {(last - limit) / SEC:.1f} s past its time limit "
                             + extended_for(until.why, cfg))
            if not self.interrupted:
                notes.extend(kind.notes(workload_ops, cfg))
                self._final_phase(driver, env, pkgs, history, world, kind, threads, process_of)
        finally:
            progress.close()

    def _set_up(self, kind, run: RunDir, notes: list):
        """``(target, client generator, world)``: the workload fitted to the backend,
        built, its target set up and seeded, then fitted to what the target is."""
        from chaos import sut
        from chaos.sut.base import redact_dsn

        cfg = self.cfg
        kind.prepare(cfg, sut.get(cfg.backend).abilities(backend_options(cfg)), notes)
        client_gen, world = kind.build(cfg)
        target = kind.target(cfg, run, self._note_pid, self._note_dir)
        self.cleanups.append(target.close)
        try:
            target.setup(kind.namespaces(world), kind.durable(world))
        except (StoreUnavailable, UnknownBackend) as e:  # what the input names cannot be reached or loaded
            raise SetupFailed(f"--backend {cfg.backend}: {e}") from None
        take_set_up(cfg, target, notes)
        self.known_deviations = list(getattr(target, "known_deviations", None) or [])
        adapted = kind.adapt(cfg, target, run, world, notes)
        if adapted is not None:
            client_gen, world = adapted
            run.write_yaml("test.yaml", dict(asdict(cfg), dsn=redact_dsn(cfg.dsn)))   # with what was chosen
            run.write_jsonl("schedule.jsonl", plan_schedule(cfg))
        return target, client_gen, world

    def _add_slots(self, run: RunDir, target, routes, env_for, driver) -> None:
        """One worker slot per client thread, each reaching the target's spec (through its route)."""
        from chaos import sut

        cfg, spec = self.cfg, target.spec
        # a paused writer parks at the engine's barrier hook where there is one, else it is
        # frozen inside its call (chaos.faults.incall)
        barrier = sut.get(cfg.backend).abilities(backend_options(cfg)).has("barrier", via="hook")
        release_tally, rendezvous = ReleaseTally(), Rendezvous()
        for t in range(cfg.workers):
            self.slots.append(Slot(t, routes.spec_for(spec, t) if routes else spec, env_for, run.file("logs"),
                                   driver.completions, cfg.op_timeout, self._note_pid))
            self.slots[-1].barrier = barrier
            self.slots[-1].release_freeze = self.release_freezes.get(t)
            self.slots[-1].release_tally, self.slots[-1].rendezvous = release_tally, rendezvous
            if getattr(target, "nodes", None) is not None:   # --nodes docker: each host in a container
                self.slots[-1].launcher = target.worker_launcher(t)

    def _in_call_evidence(self, coverage, ops: list[dict]) -> None:
        """Faults whose evidence the worker slots and the completions hold, not the nemesis."""
        lost = sum(s.exited_after_commit for s in self.slots)
        if lost:
            coverage.took_effect("lost-reply", lost)
        parked = sum(s.parked for s in self.slots)
        if parked:
            coverage.took_effect("pause", parked)
        aimed = sum(1 for o in ops if o.get("type") != "invoke" and isinstance(o.get("fault"), dict)
                    and o["fault"].get("by") == "kill-nemesis" and o["fault"].get("inside"))
        if aimed:   # kills armed for a publish proved themselves inside their calls
            coverage.took_effect("kill", aimed)

    def _final_phase(self, driver, env, pkgs, history, world, kind, threads, process_of) -> None:
        # heal every fault; I/O faults first (a server cannot restart while its fsyncs fail)
        driver.phase = "final phase: healing every fault"
        for pkg in sorted(pkgs, key=lambda p: HEAL_ORDER.index(p.name) if p.name in HEAL_ORDER else len(HEAL_ORDER)):
            history.append({"process": NEMESIS, "type": "invoke", "f": "heal", "time": driver.now(),
                            "value": {"fault": pkg.name}})
            try:
                value, typ = pkg.final(env), "ok"
            except Exception as e:
                value, typ = {"took_effect": False, "error": f"{type(e).__name__}: {e}"}, "info"
            history.append({"process": NEMESIS, "type": typ, "f": "heal", "time": driver.now(),
                            "value": dict(value, fault=pkg.name)})
        for slot in self.slots:  # fresh hosts (no armed one-shot faults) for the read-back
            slot.kill()
        # let every lease expire (real time: the backend's clock is the authority)
        driver.phase = f"final phase: letting leases expire ({kind.settle_s(self.cfg):.1f} s)"
        self.stop.wait(kind.settle_s(self.cfg))
        driver.phase = "final phase: reading everything back"
        ops = history.snapshot()
        start = len(ops)

        def call(client_ops: list[dict], phase: str | None = None) -> None:   # the kind's final ops, each to completion
            if phase:
                driver.phase = f"final phase: {phase}"
            interpret(clients(client_ops), threads, driver, self.cfg.seed, process_of=process_of)
        kind.final_phase(self.cfg, world, ops, call)
        for op in history.snapshot()[start:]:
            if op.get("process") != NEMESIS and op["type"] == "info":
                self.final_incomplete.append(f"final read-back {op['f']} ended info: {str(op.get('error', ''))[:160]}")

    def _results(self, cfg, run, ops, coverage, capabilities, started, notes, world, kind) -> dict:
        stats = op_stats(ops)
        checker_results: dict = {}
        ctx: dict = {}
        known_report: list = []
        verdict = "unknown"
        if self.interrupted:
            notes.append("the run was interrupted before the final phase; not checked")
        else:
            try:
                ctx = kind.ctx(cfg, world, capabilities)
                if self.known_deviations:
                    ctx["known_deviations"] = self.known_deviations
                merged = kind.check(ops, ctx)
                known_report = merged.get("known_deviations", [])
                checker_results = merged.get("checkers", {})
                v = merged.get("valid")
                verdict = "valid" if v is True else "invalid" if v is False else "unknown"
            except Exception as e:
                notes.append(f"checkers unavailable: {type(e).__name__}: {e}")
        mismatch = next((str(o["error"]).split("ProfileMismatch: ", 1)[1] for o in ops
                         if o.get("process") != NEMESIS and o["type"] == "info"
                         and "ProfileMismatch: " in str(o.get("error"))), None)
        if mismatch:   # the profile's error (backends.external): those calls proved nothing about the program
            verdict = "unknown" if verdict == "valid" else verdict
            notes.insert(0, f"the program contradicts its profile, the calls it showed in are info: {mismatch}")
        if self.final_incomplete and verdict == "valid":
            verdict = "unknown"
            notes += [f"the final durable check could not run: {n}" for n in self.final_incomplete]
        missing = coverage.missing()
        if missing and verdict == "valid":
            verdict = "unknown"
            notes.append(f"requested faults never took effect: {', '.join(missing)}")
        # per contract path, for the workloads that declare their paths
        paths = kind.coverage(ops, cfg, capabilities)
        from chaos.reports.evidence import evidence
        verdict = self._workload_gate(verdict, paths, stats, notes)
        code = {"valid": ExitCode.VALID, "invalid": ExitCode.INVALID}.get(verdict, ExitCode.UNKNOWN)
        return {
            "schema_version": 1,
            "test": {"name": cfg.name, "backend": cfg.backend, "workload": cfg.workload, "nemesis": list(cfg.nemesis),
                     "workers": cfg.workers, "time_limit": cfg.time_limit, "seed": cfg.seed, "command": cfg.command},
            "capabilities": capabilities,
            "verdict": verdict,
            "exit_code": int(code),
            "checkers": checker_results,
            "fault_coverage": coverage.to_json(),
            "workload_coverage": paths,
            # an interrupted run is measured up to where it stopped (a stall to the time limit it never
            # reached would be of its own making)
            "evidence": evidence(ops, cfg.time_limit if self.stopped_at_s is None
                                 else min(cfg.time_limit, self.stopped_at_s), paths),
            "stats": stats,
            "ctx": ctx,
            "started_at": started,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "run_dir": run.path,
            "notes": notes,
            "known_deviations": known_report,
            "timing": cfg.timing or None,
        }

    @staticmethod
    def _workload_gate(verdict: str, paths: dict, stats: dict, notes: list) -> str:
        """A valid verdict proves something only if the run exercised what it was
        configured to: every requested path completed, most ops were definite.
        (An unknown run says these reasons too; an invalid one stands.)"""
        if verdict == "invalid":
            return verdict
        from workloads.coverage import missing as missing_paths

        never = missing_paths(paths)
        if never:
            notes.append(f"requested workload paths never completed: {', '.join(never)}")
        if stats["ops"] == 0 or stats["info"] * 2 > stats["ops"]:
            notes.append(f"most operations ended info ({stats['info']} of {stats['ops']}): the replies prove "
                         "too little to judge the backend")
        return "unknown" if never or stats["ops"] == 0 or stats["info"] * 2 > stats["ops"] else verdict

    def _teardown(self) -> None:
        for slot in self.slots:
            slot.stop()
            try:
                slot.kill()
            except Exception:
                pass
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:
                print(f"chaos: cleanup step failed: {type(e).__name__}: {e}", file=sys.stderr)
        tmp_dirs = [os.path.dirname(self.pidfile)] if hasattr(self, "pidfile") else []
        for d in tmp_dirs:
            shutil.rmtree(d, ignore_errors=True)
        # what the run's programs left behind (an external CLI's daemonized child from a
        # set-up call, re-parented to this subreaper): everything under us that is new
        procs.kill_new_descendants(getattr(self, "children_before", set()))


def take_set_up(cfg, target, notes: list[str]) -> None:
    """What a set-up target gives the run, in either mode: its notes (writes not confined), and its
    capabilities reply, which the whole run is planned from (``SetupFailed`` when it is not the contract's)."""
    from chaos.replyview import capabilities_problem

    notes.extend(target.setup_notes)
    problem = capabilities_problem(target.capabilities)
    if problem:
        raise SetupFailed(f"--backend {cfg.backend}: {problem}")


def op_stats(ops: list[dict]) -> dict:
    """results.json's ``stats``: the client completions by type, and how long the history ran."""
    client = [o for o in ops if o.get("process") != NEMESIS and o["type"] != "invoke"]
    return {"ops": len(client), "ok": sum(o["type"] == "ok" for o in client),
            "fail": sum(o["type"] == "fail" for o in client), "info": sum(o["type"] == "info" for o in client),
            "duration_s": round(ops[-1]["time"] / 1e9, 3) if ops else 0.0}


def publish_run(run: RunDir, report: bool) -> None:
    """After results.json: the reports (report.html or only junit.xml), then ``store/latest``.
    A report failure or a latest link left alone never loses the verdict: each is one line."""
    try:
        from chaos import reports

        if report:
            reports.write_all(run.path)
        else:
            reports.write_junit(reports.load_run(run.path))
    except Exception as e:
        print(f"chaos: report not written: {type(e).__name__}: {e}", file=sys.stderr)
    not_linked = run.link_latest()
    if not_linked:
        print(f"chaos: {not_linked}", file=sys.stderr)


def kill_landings(ops: list[dict]) -> dict[str, int]:
    """Per op kind, how many of the kill nemesis's kills landed while that op
    was in flight (a kill armed for a publish lands with the publish's
    completion: ``fault.by == "kill-nemesis"`` and ``inside``)."""
    out: dict[str, int] = {}
    for o in ops:
        if o.get("process") == NEMESIS and o.get("f") == "kill" and o.get("type") == "ok":
            for k in (o.get("value") or {}).get("killed") or []:
                if k.get("gone") and k.get("during"):
                    out[k["during"]] = out.get(k["during"], 0) + 1
        fault = o.get("fault") if o.get("type") != "invoke" else None
        if isinstance(fault, dict) and fault.get("by") == "kill-nemesis" and fault.get("inside"):
            out[o["f"]] = out.get(o["f"], 0) + 1
    return out


def run(cfg: RunConfig, report: bool = True) -> int:
    return Run(cfg, report=report).execute()
