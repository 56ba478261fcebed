"""How often a partition catches the worker-side lease-cache bug, per scenario.

For each seed: one ``chaos run --backend postgres --nemesis partition`` of the
planted bug (``chaos.testing.lease_mutants:open_trust_lease_from_reply``) and
one of the correct backend, side by side against one PostgreSQL server
(``--dsn``: a fresh schema per run). Per scenario it prints the verdicts, how
many cuts were healed after a rival's takeover, and the wall time per run::

    python benchmarks/renew_cut_detection.py [--seeds 1-10] [--scenario partitioned-renew] [--time-limit 2]

``partitioned-renew`` (``partition_after: renew``) should catch the bug in
every seed and stay valid on the correct backend; ``partitioned-holder``
(a drawn cut at a drawn time) catches it only when a renew's reply happens
to be held past the lease.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TRUST_LEASE = "chaos.testing.lease_mutants:open_trust_lease_from_reply"


def one(dsn: str, store: str, scenario: str, seed: int, time_limit: float, factory: str | None) -> dict:
    from chaos.commands.test_all import RunRequest, run_one

    extra = ["--scenario", scenario, "--dsn", dsn] + (["--factory", factory] if factory else [])
    t0 = time.monotonic()
    out = run_one(RunRequest(backend="postgres", nemesis=["partition"], seed=seed, time_limit=time_limit,
                             workers=4, store=store, extra_args=extra))
    heals = []
    if out.run_dir:
        with open(os.path.join(out.run_dir, "history.jsonl")) as f:
            heals = [o["value"] for o in map(json.loads, f) if o.get("f") == "partition-heal" and o["type"] == "ok"]
    return {"verdict": out.results.get("verdict", f"exit {out.exit_code}"), "wall_s": round(time.monotonic() - t0, 1),
            "cuts": len(heals), "takeovers": sum(1 for h in heals if h.get("rival") or h.get("at") != "renew"),
            "took_effect": (out.results.get("fault_coverage") or {}).get("partition", {}).get("took_effect", 0),
            "notes": out.results.get("notes", [])}


def main(argv=None) -> int:
    from chaos.commands.test_all import seeds_of
    from chaos.faults.pgserver import PgServer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-10")
    p.add_argument("--scenario", default="partitioned-renew")
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    store = tempfile.mkdtemp(prefix="renew-cut-", dir="/tmp")
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; scenario {args.scenario}, "
          f"{args.time_limit:g} s runs; store {store}")
    server = PgServer()
    rows = []
    try:
        for seed in seeds_of(args.seeds):
            for label, factory in (("bug", TRUST_LEASE), ("correct", None)):
                row = dict(one(server.dsn(), os.path.join(store, label), args.scenario, seed, args.time_limit, factory),
                           seed=seed, backend=label)
                rows.append(row)
                print(f"seed {seed:3d} {label:8s} {row['verdict']:8s} cuts {row['cuts']} takeovers {row['takeovers']} "
                      f"took_effect {row['took_effect']}  {row['wall_s']:5.1f} s", flush=True)
    finally:
        server.cleanup()
    for label, want in (("bug", "invalid"), ("correct", "valid")):
        mine = [r for r in rows if r["backend"] == label]
        hit = sum(r["verdict"] == want for r in mine)
        print(f"{label}: {want} in {hit} of {len(mine)} seeds; mean {sum(r['wall_s'] for r in mine) / len(mine):.1f} s a run")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
