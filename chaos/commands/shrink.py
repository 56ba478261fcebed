"""``chaos shrink RUN_DIR``: re-run a failing run with fewer faults, workers,
time and tuples until nothing more can be removed while the same checker
still fails in a majority of replays; print the minimal reproduce command and
how many runs it took; store it in ``RUN_DIR/shrunk/`` (``chaos.shrink``).
An existing ``RUN_DIR/shrunk/`` is never replaced without ``--force``.
Exit 0 when a minimal config was found and confirmed in a majority of the
confirmation replays, 1 when it was not confirmed, 2 when the run does not
reproduce, 254 on bad input."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from chaos.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a stored run directory whose verdict is invalid")
    p.add_argument("--invariant", default=None,
                   help="the checker that must keep failing (default: the run's first failing one, "
                        "stale_write, durability, ... before linearizable)")
    p.add_argument("--budget", type=float, default=900.0, help="stop within this many seconds (default 900)")
    p.add_argument("--replays", type=int, default=3, help="replays per candidate; a majority must fail (default 3)")
    p.add_argument("--confirm", type=int, default=5, help="replays of the minimal config at the end (default 5)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing RUN_DIR/shrunk/ (an earlier shrink's result); without it, refuse")


def run(args: argparse.Namespace) -> int:
    from chaos.shrink import Shrinker

    if not os.path.isfile(os.path.join(args.run_dir, "test.yaml")) or \
            not os.path.isfile(os.path.join(args.run_dir, "results.json")):
        raise UsageError(f"{args.run_dir}: not a run directory (no test.yaml / results.json)")
    if not (0 < args.budget < float("inf")) or args.replays < 1 or args.confirm < 1:
        raise UsageError("--budget, --replays and --confirm must be positive (and --budget finite)")
    shrunk = os.path.join(args.run_dir, "shrunk")
    if os.path.lexists(shrunk) and not args.force:
        raise UsageError(f"{shrunk} exists (an earlier shrink's result): move it away, or give --force to replace it")
    try:
        shrinker = Shrinker(args.run_dir, invariant=args.invariant, replays=args.replays, confirm=args.confirm,
                            budget_s=args.budget)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if os.path.lexists(shrunk):   # --force: the earlier result goes, as asked
        if os.path.isdir(shrunk) and not os.path.islink(shrunk):
            shutil.rmtree(shrunk)
        else:
            os.unlink(shrunk)
    try:
        out = shrinker.shrink()
    except ValueError as e:   # the original does not reproduce
        print(f"chaos shrink: {e}", file=sys.stderr)
        return 2
    cfg = out.config
    print(f"chaos shrink: {shrinker.invariant} still fails with {len(cfg.get('faults') or [])} fault ops "
          f"({_units(cfg)} faults), {cfg['workers']} workers, {cfg['time_limit']:g} s "
          f"(was {len(shrinker.units)} faults, {shrinker.cfg['workers']} workers, {shrinker.cfg['time_limit']:g} s)")
    print(f"chaos shrink: {out.runs} runs in {shrinker.elapsed():.0f} s; the minimal config failed in "
          f"{out.confirmed} of {out.confirm_runs} confirmation replays"
          + ("; budget used up" if out.budget_exhausted else ""))
    print(f"chaos shrink: stored in {shrinker.out_dir}")
    print(f"reproduce: {out.reproduce}")
    return 0 if out.confirmed * 2 > out.confirm_runs else 1


def _units(cfg: dict) -> int:
    from chaos.shrink import _units_of

    return len(_units_of(cfg))
