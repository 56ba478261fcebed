"""``chaos shrink RUN_DIR``: the smallest run that still breaks the same invariant.

A failing run is plain data (``test.yaml``: a ``RunConfig``; ``schedule.jsonl``:
its planned faults), so a smaller run is a smaller config. ``Shrinker``
re-runs reduced configs and keeps one only when **the same checker** fails
again in a majority of replays (``--replays``, 3 by default: it stops early
once the majority is decided; a replay that proves nothing either way, one
that crashed, timed out or whose checker could not decide, as a loaded machine
makes some, is run again, a bounded number of times), in rounds until a whole
round removes nothing:

1. faults: delta debugging (Zeller's ddmin) over the schedule's fault units
   (a fault and its heal are one unit), after trying no faults at all;
2. workers: the fewest of 1, 2, 3, 4, half that still fails (a fault's
   target slots beyond the new count are dropped; a fault left with none
   moves to slot ``t mod workers``);
3. time: halve the time limit while it still fails (not below 2 s; faults
   planned after the new limit are dropped);
4. tuples: one namespace, then fewer items (claims workload).

The reduced schedule runs as ``RunConfig.faults`` (an explicit fault list in
``test.yaml``; the packages still come from ``nemesis``), so every candidate
and the result are reproducible with ``chaos run --config FILE``. At the end
the minimal config is replayed ``--confirm`` times (5) and the count reported;
when it fails in fewer than 4 of 5 (a majority of 3 during the search can be
luck), the previous kept config is confirmed instead, and so on.
Everything goes beside the original: ``RUN_DIR/shrunk/`` holds ``test.yaml``
(the minimal config), ``shrink.json`` (every candidate, its replays, verdicts
and timing) and ``run/`` (a failing replay of the minimal config, with its
report.html; replays run with ``--no-report``). It stops within ``--budget``
seconds: the search ends early enough to leave, at the replays' measured pace
(a loaded machine replays slowly), time to confirm its result and one fallback
(the best config found so far is the result).

A deterministic run (``chaos run --deterministic``) replays exactly: the same
config gives the same history, so each candidate runs once and the minimal
config is confirmed by one replay whose history digest must equal its
candidate's (``shrink.json``: ``exact``, ``replayed_exactly``). Its fault
units are its requested nemeses (the seed places each one's exact points);
the time limit halves down to 0.5 s. A smaller candidate is another schedule,
not a part of the original one: what is kept is a smaller run that breaks the
same rule, exactly reproducible.

``replay`` is injectable (``Shrinker(..., replay=fn)``): tests drive the
search with a simulated failure predicate.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import yaml

#: checkers in the order a failing run's invariant is chosen (the generic linearizability check last)
PREFERENCE = ("stale_write", "durability", "epochs", "floors", "idempotence", "dual_ownership",
              "capability_honesty", "envelopes", "linearizable")
MIN_TIME_S = 2.0
#: a deterministic run's floor: its virtual time costs no waiting, and a short run still replays exactly
MIN_EXACT_TIME_S = 0.5


@dataclass
class Replay:
    verdict: str
    failed: bool            # the invariant under shrink said invalid
    run_dir: str | None
    wall_s: float
    checked: bool = True    # the invariant's checker said valid or invalid (not: the run crashed, timed
    #                         out, or the checker could not decide): only a checked replay is evidence


@dataclass
class Outcome:
    config: dict
    runs: int
    confirmed: int
    confirm_runs: int
    minimal_dir: str
    reproduce: str
    budget_exhausted: bool
    steps: list = field(default_factory=list)


def load_run(run_dir: str) -> tuple[dict, dict, list[dict]]:
    """(test.yaml, results.json, the planned nemesis ops) of a stored run; the
    files are read by the bounded loader, and one that is not what a run wrote
    is a ``ValueError`` (one line) naming it."""
    from backends import safeload

    cfg = safeload.yaml_file(os.path.join(run_dir, "test.yaml"), safeload.CONFIG, "test.yaml")
    results = safeload.json_file(os.path.join(run_dir, "results.json"), safeload.RESULTS, "results.json")
    if not isinstance(cfg, dict) or not isinstance(results, dict):
        raise ValueError(f"{run_dir}: test.yaml and results.json must each hold a mapping (not a run directory?)")
    for key, types in (("workers", int), ("time_limit", (int, float)), ("nemesis", list)):
        if isinstance(cfg.get(key), bool) or not isinstance(cfg.get(key), types):
            raise ValueError(f"{run_dir}/test.yaml: '{key}' is missing or of the wrong type (not a run's test.yaml)")
    if cfg.get("deterministic"):   # its faults are drawn from the seed per requested nemesis: those are its units
        return cfg, results, [{"time": 0, "f": name, "value": None} for name in cfg["nemesis"]]
    rows = cfg.get("faults")
    if rows is None:
        path = os.path.join(run_dir, "schedule.jsonl")
        text = safeload.read_bytes(path, safeload.RESULTS, "schedule.jsonl").decode("utf-8", "replace")
        rows = [safeload.json_text(line, safeload.RESULTS, f"{path} line {n}")
                for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        rows = [r for r in rows if isinstance(r, dict) and r.get("kind") == "nemesis"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"time", "f", "value"} <= set(r) for r in rows):
        raise ValueError(f"{run_dir}: its faults are not a list of {{time, f, value}} ops")
    return cfg, results, [{"time": r["time"], "f": r["f"], "value": r["value"]} for r in rows]


def failing_invariants(results: dict) -> list[str]:
    """Every invalid checker, in ``PREFERENCE`` order (unknown names last)."""
    bad = [n for n, r in (results.get("checkers") or {}).items() if isinstance(r, dict) and r.get("valid") is False]
    return [n for n in PREFERENCE if n in bad] + [n for n in bad if n not in PREFERENCE]


def failing_invariant(results: dict) -> str | None:
    """The checker to keep failing: the first invalid one in ``PREFERENCE`` order."""
    bad = failing_invariants(results)
    return bad[0] if bad else None


def fault_units(cfg: dict, ops: list[dict]) -> list[list[dict]]:
    """Group planned ops into units: a fault and the heal that ends it (a deterministic run's
    units are its requested nemeses: the seed places each one's faults)."""
    if cfg.get("deterministic"):
        return [[op] for op in ops]
    from chaos.nemesis import compose_packages
    from chaos.runner import RunConfig, nemesis_opts

    _, table, _ = compose_packages(cfg.get("nemesis") or [], nemesis_opts(RunConfig(**_fields(cfg))))
    units: list[list[dict]] = []
    open_units: dict[str, list[list[dict]]] = {}
    for op in sorted(ops, key=lambda o: o["time"]):
        pkg = table.get(op["f"])
        if pkg is not None and op["f"] in pkg.heals and open_units.get(pkg.name):
            open_units[pkg.name].pop(0).append(op)
            continue
        unit = [op]
        units.append(unit)
        if pkg is not None and pkg.heals:
            open_units.setdefault(pkg.name, []).append(unit)
    return units


def _fields(cfg: dict) -> dict:
    from dataclasses import fields

    from chaos.runner import RunConfig

    names = {f.name for f in fields(RunConfig)}
    return {k: v for k, v in cfg.items() if k in names}


def with_units(cfg: dict, units: list[list[dict]]) -> dict:
    if cfg.get("deterministic"):
        return dict(cfg, nemesis=[u[0]["f"] for u in units])
    ops = sorted((op for u in units for op in u), key=lambda o: o["time"])
    return dict(cfg, faults=ops)


def _retarget(op: dict, workers: int) -> dict | None:
    value = op.get("value")
    if isinstance(value, dict) and isinstance(value.get("targets"), list):
        # a fault whose slots are all gone moves to the slots left (t mod workers): a clock step on
        # slot 3 of 4 is still a clock step on a worker of 1; [] is "whichever slot" (a renew cut)
        kept = [t for t in value["targets"] if t < workers] or sorted({t % workers for t in value["targets"]})
        return dict(op, value=dict(value, targets=kept))
    return op


def units_for_workers(units: list[list[dict]], workers: int) -> list[list[dict]]:
    out = []
    for u in units:
        ops = [_retarget(op, workers) for op in u]
        if ops[0] is not None:
            out.append([op for op in ops if op is not None])
    return out


def units_before(units: list[list[dict]], limit_s: float) -> list[list[dict]]:
    return [u for u in units if u[0]["time"] < limit_s * 1e9]


def _chunks(items: list, n: int) -> list[list]:
    k, m = divmod(len(items), n)
    out, i = [], 0
    for j in range(n):
        size = k + (1 if j < m else 0)
        out.append(items[i:i + size])
        i += size
    return [c for c in out if c]


def _run_dir_of(store: str, name: str, stderr: str) -> str | None:
    """The run ``chaos run --store STORE --name NAME`` made: the one directory
    under ``STORE/NAME`` (each candidate has a name of its own), else the path
    its ``-> RUN_DIR`` line names (the console summary may follow that line)."""
    base = os.path.join(store, name)
    made = sorted(d for d in (os.listdir(base) if os.path.isdir(base) else ())
                  if d != "latest" and os.path.isfile(os.path.join(base, d, "results.json")))
    if made:
        return os.path.join(base, made[-1])
    m = re.search(r"-> (\S+)\s*$", stderr, re.M)
    return m.group(1) if m else None


class Budget(Exception):
    pass


class Shrinker:
    def __init__(self, run_dir: str, invariant: str | None = None, replays: int = 3, confirm: int = 5,
                 budget_s: float = 900.0, replay: Callable[[dict, str], Replay] | None = None,
                 log: Callable[[str], None] | None = None):
        self.run_dir = os.path.abspath(run_dir)
        self.cfg, self.results, ops = load_run(self.run_dir)
        # without --invariant: the run's failing checkers in preference order; one that does not fail
        # again in the original's replays (an incidental finding) gives way to the next
        self.candidates = [invariant] if invariant else failing_invariants(self.results)
        self.invariant = self.candidates[0] if self.candidates else None
        if self.invariant is None:
            raise ValueError(f"{run_dir}: no checker failed in this run (verdict {self.results.get('verdict')}); "
                             "nothing to shrink")
        self.units = fault_units(self.cfg, ops)
        # a deterministic run replays exactly (same config, same history): one run per candidate decides,
        # and one confirmation replay shows the minimal config's history is its own again
        self.exact = bool(self.cfg.get("deterministic"))
        if self.exact:
            replays, confirm = 1, 1
        self.min_time_s = MIN_EXACT_TIME_S if self.exact else MIN_TIME_S
        self.replays = replays
        self.majority = replays // 2 + 1
        self.confirm = confirm
        self.stable = -(-4 * confirm // 5)   # fails in at least 4 of 5 confirmation replays
        self.budget_s = budget_s
        self.t0 = time.monotonic()
        self.out_dir = os.path.join(self.run_dir, "shrunk")
        self.scratch = os.path.join(self.out_dir, "replays")
        self._replay = replay or self._run_replay
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.runs = 0
        self.walls: list[float] = []       # every real replay's wall time (the confirmation reserve)
        self.steps: list[dict] = []
        self.best_dir: str | None = None
        self.accepted: list[dict] = []     # every config kept, in order (the last is the smallest)

    # ------------------------------------------------------------------ replays

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def reserve(self) -> float:
        """Seconds of the budget kept for the end: confirming the minimal config and, when it
        fails by luck, one fallback, at the replays' measured pace (a loaded machine replays
        slowly), at most half the budget. A result that was never confirmed is worth nothing."""
        if not self.walls:
            return 0.0
        return min(self.budget_s / 2, 2 * self.confirm * sum(self.walls) / len(self.walls))

    def _replay_timed(self, cfg: dict, name: str) -> Replay:
        r = self._replay(cfg, name)
        if r.wall_s > 0:
            self.walls.append(r.wall_s)
        return r

    def _run_replay(self, cfg: dict, name: str) -> Replay:
        """One real ``chaos run --config`` of ``cfg`` in a subprocess."""
        os.makedirs(self.scratch, exist_ok=True)
        path = os.path.join(self.scratch, f"{name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(_plain(cfg), f, sort_keys=False)
        t = time.monotonic()
        left = self.budget_s - self.elapsed()
        try:
            # --no-report: the plots of report.html cost more than a short run itself (matplotlib's import
            # and six PNGs: 27 s of a 54-s replay at load 14); only the kept minimal run gets one (_finish)
            res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--config", path, "--store", self.scratch,
                                  "--name", name, "--no-report"], capture_output=True, text=True,
                                 timeout=max(30.0, left + 60))
        except subprocess.TimeoutExpired:
            return Replay("unknown", False, None, time.monotonic() - t, checked=False)
        run = _run_dir_of(self.scratch, name, res.stderr)
        try:
            with open(os.path.join(run, "results.json")) as f:
                results = json.load(f)
        except (OSError, TypeError, ValueError):
            return Replay("error", False, run, time.monotonic() - t, checked=False)
        valid = ((results.get("checkers") or {}).get(self.invariant) or {}).get("valid")
        return Replay(results.get("verdict", "unknown"), valid is False, run, time.monotonic() - t,
                      checked=valid in (True, False))

    def fails(self, cfg: dict, what: str) -> bool:
        """Does ``cfg`` break the invariant in a majority of replays? (stops once decided). A replay
        that proves nothing either way (it crashed, timed out, the checker could not decide: a loaded
        machine) is run again, up to ``replays`` more times; still undecided, the candidate is not kept."""
        yes = no = inconclusive = 0
        dirs, kept = [], None
        while yes + no < self.replays and inconclusive <= self.replays:
            if self.elapsed() + self.reserve() >= self.budget_s:
                raise Budget()
            self.runs += 1
            r = self._replay_timed(cfg, f"c{self.runs:03d}")
            dirs.append(r.run_dir)
            if not r.checked:
                inconclusive += 1
                if self.exact:       # a replay is exact: running it again gives the same undecided check
                    break
            elif r.failed:
                yes += 1
                kept = r.run_dir
            else:
                no += 1
            if yes >= self.majority or no > self.replays - self.majority:
                break
        ok = yes >= self.majority
        self.steps.append({"candidate": what, "faults": len(_units_of(cfg)), "workers": cfg["workers"],
                           "time_limit": cfg["time_limit"], "failed": yes, "replays": yes + no,
                           "inconclusive": inconclusive, "kept": ok, "elapsed_s": round(self.elapsed(), 1)})
        self.log(f"shrink: [{self.elapsed():6.1f}s/{self.budget_s:.0f}s] run {self.runs:3d}  {what:<34} "
                 f"faults {len(_units_of(cfg)):2d} workers {cfg['workers']:2d} time {cfg['time_limit']:g}s: "
                 f"{self.invariant} failed {yes}/{yes + no}"
                 f"{f' (+{inconclusive} inconclusive)' if inconclusive else ''}{'  kept' if ok else ''}")
        for d in dirs:   # keep only a failing replay of the best config so far
            if d and d != kept and os.path.isdir(d):
                shutil.rmtree(d, ignore_errors=True)
        if ok:
            if self.best_dir and os.path.isdir(self.best_dir):
                shutil.rmtree(self.best_dir, ignore_errors=True)
            self.best_dir = kept
            self.accepted.append(cfg)
        elif kept and os.path.isdir(kept):
            shutil.rmtree(kept, ignore_errors=True)
        return ok

    # ------------------------------------------------------------------ the search

    def shrink(self) -> Outcome:
        cfg = with_units(dict(self.cfg, name=f"{self.cfg.get('name', 'run')}-shrunk"), self.units)
        units = self.units
        exhausted = False
        try:
            for inv in self.candidates:
                self.invariant = inv
                if self.fails(cfg, f"the original ({'exact replay' if self.exact else 'explicit schedule'}), {inv}"):
                    break
            else:
                raise ValueError(f"the original run does not fail {' or '.join(self.candidates)} again in a "
                                 f"majority of {self.replays} replays: nothing to shrink")
            changed = True
            while changed:
                changed = False
                units, c = self._faults(cfg, units)
                cfg, changed = with_units(cfg, units), changed or c
                cfg, units, c = self._workers(cfg, units)
                changed = changed or c
                cfg, units, c = self._time(cfg, units)
                changed = changed or c
                cfg, c = self._tuples(cfg)
                changed = changed or c
        except Budget:
            exhausted = True
            # the budget can run out inside a step that already kept a smaller config (a halving)
            cfg = self.accepted[-1] if self.accepted else cfg
            self.log(f"shrink: search budget used up ({self.reserve():.0f} s of {self.budget_s:.0f} s kept to "
                     "confirm); the best config so far is the result")
        return self._finish(cfg, exhausted)

    def _faults(self, cfg: dict, units: list) -> tuple[list, bool]:
        if not units:
            return units, False
        if self.fails(with_units(cfg, []), "no faults"):
            return [], True
        start = len(units)
        n = 2
        while len(units) >= 2:
            chunks = _chunks(units, n)
            for i, c in enumerate(chunks):
                if len(chunks) > 1 and self.fails(with_units(cfg, c), f"faults: keep part {i + 1}/{len(chunks)}"):
                    units, n = c, max(n - 1, 2)
                    break
            else:
                for i, c in enumerate(chunks):
                    rest = [u for u in units if u not in c]
                    if rest and len(chunks) > 2 and self.fails(with_units(cfg, rest),
                                                               f"faults: drop part {i + 1}/{len(chunks)}"):
                        units, n = rest, max(n - 1, 2)
                        break
                else:
                    if n >= len(units):
                        break
                    n = min(len(units), 2 * n)
        return units, len(units) < start

    def _workers(self, cfg: dict, units: list) -> tuple[dict, list, bool]:
        w = cfg["workers"]
        for cand in sorted({c for c in (1, 2, 3, 4, w // 2) if 1 <= c < w}):
            us = units_for_workers(units, cand)
            trial = with_units(dict(cfg, workers=cand), us)
            if self.fails(trial, f"workers {w} -> {cand}"):
                return trial, us, True
        return cfg, units, False

    def _time(self, cfg: dict, units: list) -> tuple[dict, list, bool]:
        changed = False
        while cfg["time_limit"] / 2 >= self.min_time_s:
            t = round(cfg["time_limit"] / 2, 1)
            us = units_before(units, t)
            trial = with_units(dict(cfg, time_limit=t), us)
            if not self.fails(trial, f"time {cfg['time_limit']:g}s -> {t:g}s"):
                break
            cfg, units, changed = trial, us, True
        return cfg, units, changed

    def _tuples(self, cfg: dict) -> tuple[dict, bool]:
        if cfg.get("workload", "claims") != "claims":
            return cfg, False
        from workloads.claims import ClaimsConfig

        claims = dict(cfg.get("claims") or {})
        full = ClaimsConfig(**claims)
        changed = False
        if full.namespaces > 1:
            trial = dict(cfg, claims=dict(claims, namespaces=1))
            if self.fails(trial, f"namespaces {full.namespaces} -> 1"):
                cfg, claims, changed = trial, dict(claims, namespaces=1), True
        items = ClaimsConfig(**claims).items
        for cand in sorted({c for c in (1, 2, items // 2) if 1 <= c < items}):
            trial = dict(cfg, claims=dict(claims, items=cand))
            if self.fails(trial, f"items {items} -> {cand}"):
                return trial, True
        return cfg, changed

    # ------------------------------------------------------------------ result

    def _confirm(self, cfg: dict) -> tuple[int, int, str | None]:
        """(failed, replays, a failing replay's dir) of ``cfg`` over ``confirm`` replays; stops once the
        stable threshold can no longer be reached."""
        confirmed = done = inconclusive = 0
        keep = None
        while done < self.confirm and inconclusive <= self.confirm:
            if done and self.elapsed() >= self.budget_s:   # out of budget: what was confirmed so far
                break
            if done - confirmed > self.confirm - self.stable:
                break
            self.runs += 1
            r = self._replay_timed(cfg, f"confirm{self.runs:03d}")
            if not r.checked:        # proves nothing either way: run it again (bounded)
                inconclusive += 1
                if r.run_dir and os.path.isdir(r.run_dir):
                    shutil.rmtree(r.run_dir, ignore_errors=True)
                continue
            done += 1
            if r.failed:
                confirmed += 1
                if keep is None:
                    keep = r.run_dir
                    continue
            if r.run_dir and os.path.isdir(r.run_dir):
                shutil.rmtree(r.run_dir, ignore_errors=True)
        return confirmed, done, keep

    def _same_history(self, a: str | None, b: str | None) -> bool | None:
        """Did two replays of one config write the same history (their results' digests)? None: unknown."""
        digests = []
        for d in (a, b):
            try:
                with open(os.path.join(d, "results.json")) as f:
                    digests.append(json.load(f).get("history_sha256"))
            except (OSError, TypeError, ValueError):
                return None
        return None if None in digests else digests[0] == digests[1]

    def _finish(self, cfg: dict, exhausted: bool) -> Outcome:
        """Confirm the smallest kept config; when it fails in fewer than 4 of 5 (a majority of 3 can
        be luck), fall back to the previous kept one, and so on, while the budget lasts."""
        os.makedirs(self.out_dir, exist_ok=True)
        candidates = [c for c in reversed(self.accepted) if c is not cfg] if self.accepted else []
        kept_before = self.best_dir
        confirmed, done, keep_confirm = self._confirm(cfg)
        self.log(f"shrink: the minimal config fails {self.invariant} in {confirmed} of {done} replays")
        exactly = self._same_history(kept_before, keep_confirm) if self.exact else None
        if self.exact:
            self.log(f"shrink: its replay {'wrote the same history' if exactly else 'did NOT write the same history'}"
                     if exactly is not None else "shrink: its replay's history could not be compared")
        for older in candidates:
            if confirmed >= self.stable or self.elapsed() >= self.budget_s:
                break
            if keep_confirm and os.path.isdir(keep_confirm):
                shutil.rmtree(keep_confirm, ignore_errors=True)
            cfg = older
            confirmed, done, keep_confirm = self._confirm(cfg)
            self.log(f"shrink: fell back to a larger config ({len(_units_of(cfg))} faults, {cfg['workers']} workers, "
                     f"{cfg['time_limit']:g} s): fails in {confirmed} of {done} replays")
        cfg_path = os.path.join(self.out_dir, "test.yaml")
        with open(cfg_path, "w") as f:
            yaml.safe_dump(_plain(cfg), f, sort_keys=False)
        kept = keep_confirm or self.best_dir
        minimal = os.path.join(self.out_dir, "run")
        if os.path.isdir(minimal):
            shutil.rmtree(minimal)
        if kept and os.path.isdir(kept):
            shutil.move(kept, minimal)
            self._report(minimal)
        if self.best_dir and self.best_dir != kept and os.path.isdir(self.best_dir):
            shutil.rmtree(self.best_dir, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)
        reproduce = f"chaos run --config {cfg_path}"
        outcome = Outcome(config=cfg, runs=self.runs, confirmed=confirmed, confirm_runs=done, minimal_dir=minimal,
                          reproduce=reproduce, budget_exhausted=exhausted, steps=self.steps)
        with open(os.path.join(self.out_dir, "shrink.json"), "w") as f:
            json.dump({"original": self.run_dir, "invariant": self.invariant, "runs": self.runs, "exact": self.exact,
                       "elapsed_s": round(self.elapsed(), 1), "budget_s": self.budget_s,
                       "budget_exhausted": exhausted, "replays": self.replays,
                       "original_faults": len(self.units), "original_workers": self.cfg["workers"],
                       "faults": len(_units_of(cfg)), "fault_ops": len(cfg.get("faults") or []),
                       "workers": cfg["workers"], "time_limit": cfg["time_limit"],
                       "confirmed": confirmed, "confirm_runs": done, "reproduce": reproduce,
                       "replayed_exactly": exactly,
                       "steps": self.steps}, f, indent=2)
        return outcome


    def _report(self, run_dir: str) -> None:
        """report.html of the kept minimal run (its replays ran with ``--no-report``)."""
        from chaos import reports

        try:
            reports.write_all(run_dir)
        except Exception as e:  # a report failure never loses the shrink's result
            self.log(f"shrink: report not written for {run_dir}: {type(e).__name__}: {e}")


def _units_of(cfg: dict) -> list:
    """Fault units of a candidate (a fault op and its heal count as one; a deterministic run's nemeses)."""
    if cfg.get("deterministic"):
        return [[{"time": 0, "f": name, "value": None}] for name in cfg.get("nemesis") or []]
    return fault_units(cfg, cfg.get("faults") or [])


def _plain(x):
    """YAML-safe plain data (tuples -> lists)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x
