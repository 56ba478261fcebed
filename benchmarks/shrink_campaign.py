"""Shrink every planted bug of the red team and report how small it got.

For each planted bug: one real ``chaos run`` with the recipe that catches it
(``chaos.testing.mutants_detect.RECIPES``; the power-loss and partition bugs
with their own nemesis), then ``chaos shrink`` of that run. The table says,
per bug, the invariant kept, faults / workers / time before and after, how
many runs the shrink took and in how many of 5 confirmation replays the
minimal config failed. Usage::

    python benchmarks/shrink_campaign.py [--budget 300] [--only NAME,...] [--store DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

#: bug -> (factory, chaos-run arguments beyond the store); recipes as the detection tests pin them
BUGS = {
    "no-fence-epoch": ("chaos.testing.mutants:open_no_fence_epoch", "stale-writer", 1),
    "advisory-claims-fenced": ("chaos.testing.mutants:open_advisory_claims_fenced", "stale-writer", 1),
    "expiry-by-worker-clock": ("chaos.testing.mutants:open_expiry_by_worker_clock", "clock-regression", 1),
    "epoch-reuse-after-restart": ("chaos.testing.mutants:open_epoch_reuse_after_restart", "restart-1worker", 1),
    "lying-unchanged": ("chaos.testing.mutants:open_lying_unchanged", "plain", 1),
    "floor-not-persisted-on-reject": ("chaos.testing.mutants:open_floor_not_persisted_on_reject",
                                      "clock-regression", 1),
    "non-idempotent-publish": ("chaos.testing.mutants:open_non_idempotent_publish", "careless-client", 2),
    "fence-owner-only": ("chaos.testing.mutants:open_fence_owner_only", "careless-client", 2),
    "sync-off": ("chaos.testing.sync_variants:open_sync_off", None, 1),
    "trust-lease-from-reply": ("chaos.testing.lease_mutants:open_trust_lease_from_reply", None, 3),
}


def failing_run(name: str, store: str, tries: int = 2) -> str | None:
    """Run the bug with its recipe (its seed, then the next ones); the first invalid run's directory."""
    for k in range(tries):
        run_dir = _one_run(name, store, BUGS[name][2] + k)
        if run_dir:
            return run_dir
    return None


def _one_run(name: str, store: str, seed: int) -> str | None:
    from chaos.commands.test_all import RunRequest, run_one
    from chaos.testing.mutants_detect import RECIPES, chaos

    factory, recipe, _ = BUGS[name]
    if name == "sync-off":
        out = run_one(RunRequest(backend="sqlite", nemesis=["power-loss"], seed=seed, time_limit=6, workers=4,
                                 store=store, factory=factory, name=name))
    elif name == "trust-lease-from-reply":
        out = run_one(RunRequest(backend="postgres", nemesis=["partition"], seed=seed, time_limit=4, workers=4,
                                 store=store, name=name,
                                 extra_args=["--scenario", "partitioned-renew", "--factory", factory]))
    else:
        out = chaos(factory, RECIPES[recipe], store, seed=seed, name=name)
    return out.run_dir if out.results.get("verdict") == "invalid" else None


def main(argv=None) -> int:
    from chaos.shrink import Shrinker, _units_of

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=300.0)
    p.add_argument("--only", default=None)
    p.add_argument("--store", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    store = args.store or tempfile.mkdtemp(prefix="shrink-campaign-", dir="/tmp")
    names = args.only.split(",") if args.only else list(BUGS)
    rows = []
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; budget {args.budget:g} s per bug; store {store}")
    for name in names:
        t0 = time.monotonic()
        run_dir = failing_run(name, os.path.join(store, name))
        if run_dir is None:
            rows.append({"bug": name, "caught": False})
            print(f"{name:30} not caught by its recipe this time", flush=True)
            continue
        sh = Shrinker(run_dir, budget_s=args.budget, log=lambda line: None)
        try:
            out = sh.shrink()
        except ValueError as e:
            rows.append({"bug": name, "caught": True, "error": str(e)})
            print(f"{name:30} {e}", flush=True)
            continue
        row = {"bug": name, "caught": True, "invariant": sh.invariant,
               "faults": f"{len(sh.units)} -> {len(_units_of(out.config))}",
               "workers": f"{sh.cfg['workers']} -> {out.config['workers']}",
               "time_s": f"{sh.cfg['time_limit']:g} -> {out.config['time_limit']:g}",
               "runs": out.runs, "confirmed": f"{out.confirmed}/{out.confirm_runs}",
               "wall_s": round(time.monotonic() - t0), "budget_exhausted": out.budget_exhausted,
               "reproduce": out.reproduce}
        rows.append(row)
        print(f"{name:30} {row['invariant']:12} faults {row['faults']:8} workers {row['workers']:7} "
              f"time {row['time_s']:10} runs {row['runs']:3} confirmed {row['confirmed']} ({row['wall_s']} s)",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
