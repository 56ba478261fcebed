"""What a deterministic run will do, decided before it starts: whether it can run at all (``refusal``),
and which exact faults it makes, each at the n-th matching scheduling point from a virtual instant on,
drawn from the seed (``fault_rules``); and, once it ended, whether each that came took effect
(``took_effect``).
"""

from __future__ import annotations

import random

from chaos.deterministic.callfaults import STEP_CALLS
from chaos.deterministic.rules import FaultRule

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
#: the calls a lost reply or a power cut may land at: changes to the store (not lock steps, which a
#: read-only call takes too: its reply is not one whose loss hides a change)
CHANGE_CALLS = KILL_CALLS - {"lock", "unlock", "flock"}
#: a freeze holds its thread's process this long (virtual ms), drawn as the timed pause draws its duration, but
#: at most a quarter of the time limit: a frozen lock holder stalls every other worker, and a freeze
#: as long as a short run would leave the other faults no points to land at
PAUSE_MS = (1000, 4000)
#: a restart comes at the n-th op handed to a worker that has a process (n drawn up to this) from its instant on
RESTART_NTH = 10
#: the expected number of scheduling points per run, per worker and second of the time limit (at
#: least 1000): the clock fault's point is drawn over a quarter of it (``clock_rule``). PCT's change
#: points are virtual instants over the time limit (``Scheduler(horizon_ns=)``: runs differ tenfold in
#: points per second, sqlite's default 1,209 per worker-second, a Python mutant's 136), unless
#: ``--pct-points`` gives a count of points to draw them over
POINTS_PER_WORKER_SECOND = 400
SEC_NS = 1_000_000_000
CLOCK_MODES = ("backward", "forward")


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
