"""Interleavings searched: N deterministic PCT schedules per depth, every failing seed kept.

A seed's work is ``explore_one(task) -> dict``: plain data in, plain data out,
a top-level function (picklable), so a cluster fan-out (Dask) can run it as
well as the sequential loop here (``explore``). A task is the exploration's
config (``CONFIG_KEYS``) plus ``seed``, ``depth`` and ``points``; its result
says the verdict, the anomaly names, the run dir (deleted unless the run
failed or ``keep`` is set) and the ``chaos run --config`` line that replays it
exactly (the same seed gives the same history).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import time

#: an exploration's config: plain data, so it travels to a cluster worker unchanged
DEFAULT_CONFIG = {"backend": "sqlite", "factory": None, "workers": 3, "namespaces": 1, "items": 2,
                  "time_limit": 2.0, "nemesis": ["kill"], "store": "store", "name": "explore", "keep": False,
                  "backend_command": None, "profile": None, "lease_ms": None, "work_ms": None}
CONFIG_KEYS = tuple(DEFAULT_CONFIG)
FAILED = ("invalid",)


def run_config(task: dict):
    """The ``RunConfig`` of one task (a deterministic claims run on few items)."""
    from chaos.runner import RunConfig

    return RunConfig(name=task["name"], backend=task["backend"], workload="claims", nemesis=list(task["nemesis"]),
                     workers=int(task["workers"]), time_limit=float(task["time_limit"]), seed=int(task["seed"]),
                     store=task["store"], claims=_claims(task),
                     factory=task.get("factory"), backend_command=task.get("backend_command"),
                     profile=task.get("profile"), deterministic=True, pct_depth=int(task["depth"]),
                     pct_points=task.get("points"), command="chaos explore")


def _claims(task: dict) -> dict:
    """The claims workload's overrides: few items, and the lease and work time when given (a black-box
    program's call is slow in virtual time: a short lease lets it expire between a publish and its retry)."""
    out = {"namespaces": int(task["namespaces"]), "items": int(task["items"])}
    if task.get("lease_ms"):
        out["lease_ms"] = int(task["lease_ms"])
    if task.get("work_ms"):
        out["work_ms"] = [int(x) for x in task["work_ms"]]
    return out


def anomaly_names(results: dict) -> list[str]:
    """The anomaly types of every invalid checker (the checker's name when it lists none), sorted."""
    names = set()
    for checker, res in (results.get("checkers") or {}).items():
        if isinstance(res, dict) and res.get("valid") is False:
            types = {a.get("type") for a in res.get("anomalies") or [] if isinstance(a, dict) and a.get("type")}
            names |= {f"{checker}:{t}" for t in types} or {checker}
    return sorted(names)


def known_names(results: dict) -> list[str]:
    """The findings the backend's profile acknowledges (``known_deviations``) that this run met, as
    ``ID (checker:type)``: a known finding is found all the same, only not a new one (the checker moved
    it from ``anomalies`` to ``known``, and the run's verdict does not count it)."""
    names = set()
    for checker, res in (results.get("checkers") or {}).items():
        for a in (res.get("known") or []) if isinstance(res, dict) else []:
            if isinstance(a, dict) and isinstance(a.get("known"), dict):
                names.add(f"{a['known'].get('id')} ({checker}:{a.get('type')})")
    return sorted(names)


def explore_one(task: dict, run_fn=None) -> dict:
    """One seed: a deterministic run of ``task`` (plain data), its verdict and findings (plain data).
    ``run_fn(cfg) -> exit code`` replaces ``chaos.deterministic.run.run`` (the crash points give
    it their exact fault)."""
    from chaos.deterministic import run as det_run
    from chaos.deterministic.plan import refusal

    cfg = run_config(task)
    why = refusal(cfg)
    out = {"seed": cfg.seed, "depth": cfg.pct_depth, "points": None, "verdict": "refused", "anomalies": [], "known": [],
           "run_dir": None, "reproduce": None, "ops": 0, "wall_s": 0.0, "error": why}
    if why:
        return out
    t0 = time.monotonic()
    console = io.StringIO()
    before = _runs(cfg)
    crashed = None
    with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
        try:
            (run_fn or (lambda c: det_run.run(c, report=False, progress=False)))(cfg)
        except Exception as e:   # one seed's crash is that seed's result (printed and stored), not the campaign's end
            crashed = f"{type(e).__name__}: {e}"
    made = sorted(_runs(cfg) - before)
    out["wall_s"] = round(time.monotonic() - t0, 2)
    if crashed or not made:
        out.update(verdict="error", error=crashed or console.getvalue()[-2000:])
        return out
    run_dir = made[-1]
    import json

    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    det = results.get("deterministic") or {}
    out.update(verdict=results["verdict"], anomalies=anomaly_names(results), known=known_names(results),
               points=det.get("points"),
               ops=results["stats"]["ops"], error=None, history_sha256=results.get("history_sha256"),
               faults=det.get("faults", []), notes=results.get("notes", []))
    if results["verdict"] in FAILED or out["known"] or task.get("keep"):
        out.update(run_dir=run_dir, reproduce=f"chaos run --config {os.path.join(run_dir, 'test.yaml')}")
    else:
        _discard(run_dir)
    return out


def _discard(run_dir: str) -> None:
    """Remove a run nobody needs, and its name's directory once only the latest link is left: the link,
    then the directory with ``rmdir``, which leaves it if a run of the same name made its directory there
    meanwhile (another explore in the store: ``rmtree`` would take that run with it), and never removes
    a ``latest`` that is not a link."""
    shutil.rmtree(run_dir, ignore_errors=True)
    base = os.path.dirname(run_dir)
    if set(os.listdir(base)) <= {"latest"}:
        latest = os.path.join(base, "latest")
        with contextlib.suppress(OSError):
            if os.path.islink(latest):
                os.unlink(latest)
            os.rmdir(base)


def _runs(cfg) -> set[str]:
    """The run directories under the run's name in its store (a new run is the one that was not there)."""
    base = os.path.join(os.path.abspath(cfg.store), f"{cfg.name}")
    if not os.path.isdir(base):
        return set()
    return {os.path.join(base, d) for d in os.listdir(base)
            if d != "latest" and os.path.isfile(os.path.join(base, d, "results.json"))}


def tasks(config: dict, seeds: list[int], depths: list[int], points: int | None) -> list[dict]:
    """Every (depth, seed) task of an exploration, depth-major."""
    return [dict(config, seed=s, depth=d, points=points, name=f"{config['name']}-d{d}-s{s}")
            for d in depths for s in seeds]


def calibrate(config: dict) -> tuple[int, dict]:
    """The scheduling points of one depth-1 run (seed 0) of the config: PCT's change points are drawn
    over this count (a change point drawn past a run's last point never happens)."""
    res = explore_one(dict(config, seed=0, depth=1, points=None, name=f"{config['name']}-calibrate"))
    return max(1, int(res["points"] or 1000)), res


def tally(results: list[dict]) -> dict:
    """Per depth: schedules run, verdict counts, each anomaly name's count and seeds."""
    out: dict = {}
    for r in results:
        d = out.setdefault(r["depth"], {"schedules": 0, "verdicts": {}, "anomalies": {}, "known": {}, "failing": []})
        d["schedules"] += 1
        d["verdicts"][r["verdict"]] = d["verdicts"].get(r["verdict"], 0) + 1
        for name in r["anomalies"]:
            d["anomalies"].setdefault(name, []).append(r["seed"])
        for name in r.get("known") or []:
            d["known"].setdefault(name, []).append(r["seed"])
        if r["verdict"] in FAILED:
            d["failing"].append(r)
    return out


def render(summary: dict) -> list[str]:
    lines = []
    for depth in sorted(summary):
        d = summary[depth]
        verdicts = ", ".join(f"{v} {n}" for v, n in sorted(d["verdicts"].items()))
        lines.append(f"depth {depth}: {d['schedules']} schedules: {verdicts}")
        for name, seeds in sorted(d["anomalies"].items()):
            shown = ", ".join(map(str, seeds[:10])) + (" ..." if len(seeds) > 10 else "")
            lines.append(f"  {name}: {len(seeds)} (seeds {shown})")
        for name, seeds in sorted(d["known"].items()):
            shown = ", ".join(map(str, seeds[:10])) + (" ..." if len(seeds) > 10 else "")
            lines.append(f"  found {name}, known (the profile acknowledges it): {len(seeds)} (seeds {shown})")
    return lines
