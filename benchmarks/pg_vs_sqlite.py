"""Decisions per second of the strict-fenced PostgreSQL and SQLite backends,
side by side, at 1, 4 and 16 worker processes (measured in one run).

Each worker process opens its own backend (as ``chaos.host`` would) and loops
acquire -> renew -> release on its own item until the window closes; every
call is one durable, floor-persisting decision (PostgreSQL: fsync=on,
synchronous_commit=on; SQLite: synchronous=FULL). All decisions share one
namespace, so they serialize on its floor in both backends: this measures
the cost of that serialization plus the commit fsync.

    /work/main/.venv/bin/python benchmarks/pg_vs_sqlite.py [--seconds 3] [--workers 1,4,16]
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NS = "wbns_" + "1" * 32
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def item_id(n: int) -> str:
    tail = ""
    for _ in range(3):
        n, r = divmod(n, len(ALPHABET))
        tail = ALPHABET[r] + tail
    return "wb_01Q4837BM01W70T30B184GG" + tail


def worker(spec: dict, index: int, start, stop_at_holder, out) -> None:
    try:
        out.put(_loop(spec, index, start, stop_at_holder))
    except BaseException as e:  # report instead of leaving the parent waiting
        out.put((0, 1))
        raise SystemExit(f"worker {index}: {e!r}")


def _loop(spec: dict, index: int, start, stop_at_holder) -> tuple[int, int]:
    from backends.api import Hooks, SystemClock
    from backends.registry import open_backend
    b = open_backend(spec, SystemClock(), Hooks())
    item, owner = item_id(index), f"bench-{index}"
    last_epoch, ops, errors = 0, 0, 0
    rb = b.call("read", {"ledger_namespace": NS, "item_id": item}).envelope["result"]["read_back"]
    last_epoch = int(rb["last_epoch"])
    start.wait()
    stop_at = stop_at_holder.value
    while time.time() < stop_at:
        r = b.call("acquire", {"ledger_namespace": NS, "item_id": item, "owner_id": owner, "lease_duration_ms": 60_000,
                               "expected": {"last_epoch": str(last_epoch), "active": None}})
        if r.exit != 0:
            errors += 1
            break
        c = r.envelope["result"]["claim"]
        last_epoch = int(c["epoch"])
        r2 = b.call("renew", {"ledger_namespace": NS, "item_id": item, "owner_id": owner, "epoch": c["epoch"],
                              "expected_expires_at": c["expires_at"], "lease_duration_ms": 60_000})
        if r2.exit != 0:
            errors += 1
            break
        c2 = r2.envelope["result"]["claim"]
        r3 = b.call("release", {"ledger_namespace": NS, "item_id": item, "owner_id": owner, "epoch": c2["epoch"],
                                "expected_expires_at": c2["expires_at"]})
        if r3.exit != 0:
            errors += 1
            break
        ops += 3
    b.close()
    return ops, errors


def measure(spec: dict, n: int, seconds: float) -> tuple[float, int]:
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    stop_at = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=worker, args=(spec, i, start, stop_at, out)) for i in range(n)]
    for p in procs:
        p.start()
    time.sleep(1.0 + 0.15 * n)  # let every worker import and connect before the window opens
    stop_at.value = time.time() + seconds
    start.set()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join(30)
    return sum(r[0] for r in results) / seconds, sum(r[1] for r in results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workers", default="1,4,16")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    from chaos.faults.pgserver import PgServer
    have_sqlite = importlib.util.find_spec("backends.sqlite") is not None
    tmp = tempfile.mkdtemp(prefix="ccbench", dir="/tmp")
    rows = []
    try:
        with PgServer(max_connections=max(counts) + 20) as pg:
            from backends.api import Hooks, SystemClock
            from backends.postgres import open_backend as open_pg
            for n in counts:
                pg_be = open_pg({"dsn": pg.dsn(tcp=False), "namespaces": [NS]}, SystemClock(), Hooks())
                pg_spec = {"backend": "postgres", "dsn": pg.dsn(tcp=False), "schema": pg_be.store.schema, "namespaces": [NS]}
                pg_be.close()
                pg_rate, pg_err = measure(pg_spec, n, args.seconds)
                sq_rate, sq_err = (float("nan"), 0)
                if have_sqlite:
                    sq_spec = {"backend": "sqlite", "path": os.path.join(tmp, f"claims-{n}.db"), "namespaces": [NS]}
                    sq_rate, sq_err = measure(sq_spec, n, args.seconds)
                rows.append((n, pg_rate, sq_rate, pg_err + sq_err))
                print(f"  workers={n:2d}  postgres {pg_rate:8.1f} ops/s   sqlite {sq_rate:8.1f} ops/s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nworkers  postgres ops/s  sqlite ops/s  pg/sqlite  errors")
    for n, p, s, e in rows:
        print(f"{n:7d}  {p:14.1f}  {s:12.1f}  {p / s if s == s and s else float('nan'):9.2f}  {e:6d}")
    print(f"(window {args.seconds:.1f} s per cell; one namespace; fsync on; load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
