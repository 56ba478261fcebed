"""``chaos explore``: search on purpose with the deterministic scheduler (docs/explore.md).

``--seeds N``: N PCT schedules per depth (``--depth 1,2,3``) of a short
workload on few items; prints per depth how many schedules found what and
keeps every failing seed (its run dir and its ``chaos run --config`` line).
``--crash-points``: kills one call of each mutating kind at each of its
scheduling points in turn (``chaos.explore.crashpoints``) and prints the table
kind x points reached x findings. Exit 1 when a schedule or crash point was
invalid, 0 when every one was valid, 2 otherwise; 254 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from chaos.errors import UsageError

#: --crash-points' default time limit: a killed holder's lease expires and another worker's publish
#: still completes within it (2 s left most kills of a renew or publish 'unknown': publish ok never done)
CRASH_TIME_S = 4.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chaos.explore.seeds import DEFAULT_CONFIG as D

    p.add_argument("--seeds", type=int, default=None, help="PCT schedules per depth (seeds FIRST..FIRST+N-1)")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--depth", default="1,2,3", help="PCT depths, comma-separated (default 1,2,3)")
    p.add_argument("--points", type=int, default=None,
                   help="scheduling points the change points are drawn over (default: measured by one run)")
    p.add_argument("--crash-points", action="store_true", help="kill each mutating kind's call at each of its points")
    p.add_argument("--seed", type=int, default=1, help="--crash-points: the seed of the recorded schedule")
    p.add_argument("--max-points", type=int, default=None, help="--crash-points: at most this many points per kind")
    p.add_argument("--fault", default="kill",
                   help="--crash-points: kill the call at each point, fail each of its fsyncs with EIO (eio), cut "
                        "the power at each of its changes (power-loss: undo what no fsync covered), or several "
                        "in one exploration (kill,eio,power-loss)")
    p.add_argument("--second-crash", action="store_true",
                   help="--crash-points: then kill each crash's recovery (the next call that changes the crashed "
                        "call's item) at each of its points too")
    p.add_argument("--kinds", default=None, help="--crash-points: command kinds (default acquire,renew,release,publish)")
    p.add_argument("--backend", default=D["backend"])
    p.add_argument("--factory", default=None, help="--backend python: MODULE:FUNCTION")
    p.add_argument("--command", dest="backend_command", default=None,
                   help="--backend external: the program's command line (e.g. 'node .../wowbagger.js')")
    p.add_argument("--profile", default=None, help="--backend external: the program's profile YAML")
    p.add_argument("--workers", type=int, default=D["workers"])
    p.add_argument("--namespaces", type=int, default=D["namespaces"])
    p.add_argument("--items", type=int, default=D["items"], help="items per namespace")
    p.add_argument("--time-limit", type=float, default=None,
                   help=f"virtual seconds per run (default {D['time_limit']:g}; --crash-points {CRASH_TIME_S:g}: "
                        "after a kill the others need time for the lease to expire and the work to complete)")
    p.add_argument("--lease-ms", type=int, default=None, help="the agents' lease (default: the workload's, 1500)")
    p.add_argument("--work-ms", default=None, metavar="LO,HI",
                   help="the agents' work time between acquire and renew (default: the workload's, 100,2000)")
    p.add_argument("--nemesis", default=",".join(D["nemesis"]),
                   help="--seeds: exact faults drawn per seed (kill, fsync, clock, or none)")
    p.add_argument("--store", default=D["store"])
    p.add_argument("--name", default=D["name"])
    p.add_argument("--keep-all", action="store_true", help="keep every run dir (default: only failing ones)")
    p.add_argument("--parallel", type=int, default=None, metavar="N",
                   help="run the schedules (or crash points) on a Dask LocalCluster of N worker processes")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run the schedules (or crash points) on a running Dask cluster (claim-chaos installed on "
                        "every worker, the same --store path seen by all)")
    p.add_argument("--shard", default=None, metavar="i/n",
                   help="--seeds: keep only schedules i, i+n, ... (for CI systems that run their own matrix)")


def _ints(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what}: comma-separated integers, not {text!r}") from None
    if not out or any(d < 1 or d > 100 for d in out):
        raise UsageError(f"{what}: integers in [1, 100]")
    return out


def _work_ms(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--work-ms: LO,HI in ms, not {text!r}") from None
    if not 0 <= lo <= hi <= 3_600_000:
        raise UsageError("--work-ms: 0 <= LO <= HI <= 3600000")
    return [lo, hi]


def _faults(text: str) -> list[str]:
    faults = [f.strip() for f in text.split(",") if f.strip()]
    if not faults or any(f not in ("kill", "eio", "power-loss") for f in faults) or len(set(faults)) != len(faults):
        raise UsageError(f"--fault {text}: kill, eio, power-loss or a comma list of them (kill,eio)")
    return faults


def config_of(args) -> dict:
    from chaos.deterministic.plan import refusal
    from chaos.explore.seeds import run_config

    from chaos.explore.seeds import DEFAULT_CONFIG

    if args.time_limit is None:
        args.time_limit = CRASH_TIME_S if args.crash_points else DEFAULT_CONFIG["time_limit"]
    nemesis = [] if args.nemesis in ("", "none") else [n.strip() for n in args.nemesis.split(",")]
    if args.lease_ms is not None and not 1 <= args.lease_ms <= 3_600_000:
        raise UsageError("--lease-ms: 1 to 3600000")
    if args.workers < 1 or args.items < 1 or args.namespaces < 1 or not (0 < args.time_limit <= 3600):
        raise UsageError("--workers, --items, --namespaces must be at least 1 and --time-limit in (0, 3600]")
    if args.backend == "python" and not args.factory:
        raise UsageError("--backend python needs --factory MODULE:FUNCTION")
    config = {"backend": args.backend, "factory": args.factory, "workers": args.workers,
              "namespaces": args.namespaces, "items": args.items, "time_limit": args.time_limit,
              "nemesis": [f.replace("eio", "fsync") for f in _faults(args.fault)] if args.crash_points else nemesis,
              "store": os.path.abspath(args.store),
              "name": args.name, "keep": args.keep_all, "backend_command": args.backend_command,
              "profile": args.profile and os.path.abspath(args.profile), "lease_ms": args.lease_ms,
              "work_ms": _work_ms(args.work_ms)}
    if args.backend == "external" and not (args.backend_command and args.profile):
        raise UsageError("--backend external needs --command CMD and --profile YAML")
    if args.factory:
        from chaos.conform.adapters.python import check_factory

        check_factory(args.factory)
    why = refusal(run_config(dict(config, seed=1, depth=3, points=args.points)))
    if why:
        raise UsageError(why)
    return config


def run(args: argparse.Namespace) -> int:
    if (args.seeds is None) == (not args.crash_points):
        raise UsageError("give --seeds N or --crash-points (one of them)")
    if args.seeds is not None and not 1 <= args.seeds <= 100_000:
        raise UsageError("--seeds: an integer in [1, 100000]")
    if args.max_points is not None and args.max_points < 1:
        raise UsageError("--max-points: at least 1")
    if args.parallel is not None and args.scheduler is not None:
        raise UsageError("--parallel sizes a local cluster; a --scheduler's cluster has its own")
    if args.parallel is not None and not 1 <= args.parallel <= 512:
        raise UsageError(f"--parallel {args.parallel}: expected 1 to 512 worker processes")
    config = config_of(args)
    t0 = time.monotonic()
    if args.crash_points:
        return _crash_points(args, config, t0)
    return _seeds(args, config, t0)


def _seeds(args, config: dict, t0: float) -> int:
    from chaos.explore.seeds import calibrate, render, tally, tasks

    depths = _ints(args.depth, "--depth")
    points = args.points
    if points is None:
        points, _ = calibrate(config)
        print(f"chaos explore: one depth-1 run reached {points} scheduling points: change points are drawn over that")
    results = []
    for res in _explored(args, tasks(config, list(range(args.first_seed, args.first_seed + args.seeds)), depths, points)):
        results.append(res)
        if res["verdict"] in ("invalid", "error", "refused") or res.get("known"):
            print(f"  depth {res['depth']} seed {res['seed']}: {res['verdict']} "
                  f"{', '.join(res['anomalies']) or res.get('error') or ''}".rstrip()
                  + "".join(f"; found {k}, known" for k in res.get("known") or []), flush=True)
    summary = tally(results)
    wall = time.monotonic() - t0
    print(f"chaos explore: {len(results)} schedules in {wall:.0f} s ({60 * len(results) / max(wall, 1e-9):.1f} per minute)")
    for line in render(summary):
        print(line)
    failing = [r for r in results if r["verdict"] == "invalid"]
    for r in failing:
        print(f"failing: depth {r['depth']} seed {r['seed']}: {r['reproduce']}")
    for r in results:
        if r["verdict"] != "invalid" and r.get("known"):
            print(f"known finding: depth {r['depth']} seed {r['seed']}: {r['reproduce']}")
    _store(config, "explore.json", {"config": config, "depths": depths, "points": points, "wall_s": round(wall, 1),
                                    "results": results})
    return _code([r["verdict"] for r in results])


def _explored(args, all_tasks: list[dict]):
    """Each schedule's result as it completes (``_fanned``)."""
    from chaos.campaign.fanout import parse_shard
    from chaos.explore.seeds import explore_one

    shard = parse_shard(args.shard) if args.shard is not None else None
    for _task, res in _fanned(args, explore_one, all_tasks, shard):
        yield res


def _fanned(args, fn, tasks: list[dict], shard=None):
    """``(task, fn(task))`` as each completes: here one after another, or on a Dask cluster
    (``chaos.campaign.fanout``; a task whose worker died or raised is an ``error``, never lost)."""
    from chaos.campaign.fanout import ItemError, fan_out, shard_of

    if args.parallel is None and args.scheduler is None:
        for task in shard_of(tasks, shard):
            yield task, fn(task)
        return
    for task, res in fan_out(fn, tasks, scheduler=args.scheduler, workers=args.parallel, shard=shard):
        if isinstance(res, ItemError):
            res = {"seed": task["seed"], "depth": task.get("depth"), "verdict": "error", "anomalies": [],
                   "known": [], "error": str(res)}
        yield task, res


def _crash_points(args, config: dict, t0: float) -> int:
    from chaos.explore import crashpoints
    from chaos.explore.crashpoints import explore_crash_point

    kinds = tuple(k.strip() for k in args.kinds.split(",")) if args.kinds else crashpoints.KINDS
    unknown = set(kinds) - set(crashpoints.KINDS)
    if unknown:
        raise UsageError(f"--kinds: unknown {', '.join(sorted(unknown))} (known: {', '.join(crashpoints.KINDS)})")
    result = crashpoints.explore(dict(config, points=args.points), args.seed, args.max_points, kinds,
                                 log=lambda line: print(line, flush=True),
                                 actions=tuple({"fsync": "EIO"}.get(n, n) for n in config["nemesis"]),
                                 run_tasks=lambda tasks: _fanned(args, explore_crash_point, tasks),
                                 second=args.second_crash)
    wall = time.monotonic() - t0
    runs = [r for row in result["rows"] for r in row["runs"]]
    print(f"chaos explore --crash-points: {len(runs)} crash points in {wall:.0f} s "
          f"({60 * len(runs) / max(wall, 1e-9):.1f} per minute)")
    for line in crashpoints.table(result):
        print(line)
    for r in runs:
        if r["verdict"] == "invalid":
            print(f"failing: {r['crash']['kind']} point {r['crash']['point']}: {r['run_dir']}")
    _store(config, "crash-points.json", dict(result, wall_s=round(wall, 1)))
    return _code([r["verdict"] for r in runs])


def _code(verdicts: list[str]) -> int:
    if "invalid" in verdicts:
        return 1
    return 0 if verdicts and all(v == "valid" for v in verdicts) else 2


def _store(config: dict, name: str, data: dict) -> None:
    path = os.path.join(config["store"], config["name"] + "-" + name)
    os.makedirs(config["store"], exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)
    print(f"chaos explore: stored in {path}")
