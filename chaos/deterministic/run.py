"""``chaos run --deterministic``: one run whose history is a function of the seed.

Its own loop, beside ``chaos.runner.Run`` (which stays the timed mode): the
run dir, test.yaml, the target's provision and seed, the workload generator
and the checkers are the runner's; what differs is who runs the workers and
what time it is. One worker process per client thread
(``chaos.deterministic.worker``, single-threaded) runs under the scheduling
shim; ``workloads.interpreter.interpret`` drives the workload through
``DeterministicDriver`` (``driver.py``), whose clock is the scheduler's virtual clock and whose
``wait`` runs the scheduler (``Scheduler.run_until``) until a reply arrives or
the next op is due. The harness makes no wall-clock decision: the same seed,
program bytes and config give the same ``history.jsonl`` byte for byte;
``results.json`` records its sha256 (``history_sha256``) and the scheduler's
summary (PCT depth, points, change points, the trace's digest, every fault's
point).

Faults are exact: ``kill``, ``fsync`` (EIO), ``pause`` (a freeze),
``lost-reply``, ``power-loss`` and ``clock`` land at the n-th matching
scheduling point, n drawn from the seed (``plan.fault_rules``); the completion of
the op in flight carries the point. The other nemeses are not built for this
mode yet and are refused up front, as is a backend whose ``deterministic``
ability is missing (``plan.refusal``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict

from checkers.history import final_state_records
from chaos.deterministic import trace as schedule
from chaos.deterministic.driver import DeterministicDriver, VirtualProgress
from chaos.deterministic.plan import SEC_NS, expected_points, fault_rules, power_journal, took_effect
from chaos.deterministic.processes import SchedulerStuck
from chaos.deterministic.scheduler import Scheduler
from chaos.deterministic.shim import EPOCH_NS
from chaos.errors import ExitCode
from chaos.faults.procs import descendants, kill_new_descendants
from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage
from chaos.store import RunDir, clean_stale_tmp
from chaos.watchdog import Guard
from workloads.generator import SEC, clients, deadline
from workloads.interpreter import interpret

#: past its time limit the workload goes on while a requested fault has not landed yet (its point is
#: the n-th matching one after its instant: a short run may end before it), for at most the time limit
#: again or this much (virtual ns), whichever is longer; then the fault is missed and the run unknown
EXTEND_MIN_NS = 2_000_000_000
#: virtual time per scheduling point and per call handed to a worker: virtual time moves by the schedule
#: only, and these keep its pace near a real call's (an agent loop paced by its calls' latency would
#: otherwise run thousands of cycles per virtual second)
STEP_NS = 50_000
CALL_NS = 1_000_000

def _interrupt(signum, frame):
    raise KeyboardInterrupt


def history_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cfg, report: bool = True, config_path: str | None = None, exact_rules=None, progress: bool = True) -> int:
    """One deterministic run; the exit code is the verdict (0 valid, 1 invalid, 2 unknown).
    ``progress``: a progress line on stderr while it runs (``VirtualProgress``; not in ``chaos explore``'s
    runs, many at once).
    ``config_path``: the test.yaml it re-runs (its run's history digest is compared). ``exact_rules``
    (fault name -> its ``FaultRule`` list, or a function of the run's power-loss journal, None
    unless ``power-loss`` is asked for, giving it) replaces the seed's draw (``fault_rules``): the
    crash points of ``chaos explore`` name their exact kill, EIO or power cut."""
    from chaos.runner import publish_run, take_set_up
    from chaos.workload_kinds import workload_kind

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
    clock_took, stuck, final_incomplete, driver, interrupted, shown = None, None, [], None, False, None
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
        shown = VirtualProgress(driver, sched.faults, cfg.time_limit) if progress else None
        threads = list(range(cfg.workers))
        process_of = _workload_phase(cfg, sched, driver, client_gen, threads, notes)
        driver.record_clock_faults()   # a step at the workload's last point is recorded before its heal
        clock_took = driver.heal_clocks()   # healed at the end, as the timed nemesis's final reset
        if shown is not None:
            shown.phase = "final phase: fresh workers read every item back"
        final_incomplete = _final_phase(cfg, kind, world, sched, driver, history, target, threads, process_of)
    except SchedulerStuck as e:
        stuck = str(e)   # the run ends where the scheduler could not go on: an unknown verdict, its schedule kept
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: what ran is kept and said, unchecked, as the timed mode does
        interrupted = True
    finally:
        if shown is not None:
            shown.close()
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
    run_dir.write_json("wall.json", dict(wall, run_dir=run_dir.path, wall_s=round(time.monotonic() - wall0, 3),
                                         started_at=started))
    publish_run(run_dir, report)
    _say(cfg, run_dir, results, summary, previous, config_path, time.monotonic() - wall0)
    return 130 if interrupted else results["exit_code"]


def _workload_phase(cfg, sched, driver, client_gen, threads: list[int], notes: list[str]):
    """The workload until its time limit, and past it while a requested fault waits for its point (the
    n-th matching one after its instant: a short run may end before it); the interpreter's process map."""
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
    return process_of


def _final_phase(cfg, kind, world, sched, driver, history, target, threads: list[int], process_of) -> list[str]:
    """The kind's final ops, unfaulted, by fresh workers once every lease expired (virtually), then the
    store's final records; why each final op that ended info did (a reason for ``unknown``)."""
    sched.faults, sched.call_faults = [], []   # the final phase is not faulted: a rule left unfired is missed
    for proc in list(driver.procs.values()):
        sched.kill(proc)        # fresh workers for the read-back, as the timed mode does
    sched.replies.clear()
    sched.vt += int(kind.settle_s(cfg) * SEC)
    ops = history.snapshot()
    start = len(ops)

    def call(client_ops: list[dict], phase: str | None = None) -> None:   # each to completion
        interpret(clients(client_ops), threads, driver, cfg.seed, process_of=process_of)
    kind.final_phase(cfg, world, ops, call)
    incomplete = [f"final read-back {o['f']} ended info: {_info_reason(o)}" for o in history.snapshot()[start:]
                  if o["type"] == "info"]
    for proc in list(driver.procs.values()):
        sched.kill(proc)
    for rec in final_state_records(target.export()):
        history.append(dict(rec, time=sched.vt))
    return incomplete


def _say(cfg, run_dir, results: dict, summary: dict, previous: str | None, config_path: str | None,
         wall_s: float) -> None:
    """The run's lines: the schedule's on stderr (and whether it reproduced the run its config came from,
    with where the two parted if not), then the verdict summary on stdout, last (as chaos.runner prints it)."""
    from chaos.reports.console import summary as console_summary
    print(f"chaos: deterministic: seed {cfg.seed}, PCT depth {summary['depth']}, {summary['points']} scheduling "
          f"points, {results['stats']['ops']} ops in {summary['virtual_ns'] / SEC:.1f} virtual s "
          f"({wall_s:.1f} wall s), history sha256 {results['history_sha256'][:16]}", file=sys.stderr)
    if previous is not None:
        same = previous == results["history_sha256"]
        print(f"chaos: deterministic: {'reproduced' if same else 'NOT reproduced'}"
              f" the history of the run this config came from (sha256 {previous[:16]})", file=sys.stderr)
        if not same:
            print(schedule.compare_runs(os.path.dirname(os.path.abspath(config_path)), run_dir.path), file=sys.stderr)
    sys.stderr.flush()
    print(console_summary(dict(results, run_dir=run_dir.path), run_dir.path), flush=True)


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
