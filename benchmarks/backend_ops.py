"""acquire -> publish-claimed -> release cycles against the SQLite backend.

Three scenarios, measured in one run and printed side by side:

* ``1 proc``: one process, its own item;
* ``8 procs``: eight processes, each on its own item (contention only on the
  file's write lock: one ``BEGIN IMMEDIATE`` at a time);
* ``8 procs, 1 item``: eight processes fighting over one item (read, then
  acquire against what was read; a refusal is counted and retried).

Every call goes through the real engine and a real file with
``synchronous=FULL`` (each decision is one fsync'd commit). Usage::

    .venv/bin/python benchmarks/backend_ops.py [--cycles 160] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

NS = "wbns_" + "1" * 32
BASE_ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
ITEMS = [BASE_ITEM[:-1] + c for c in "ABCDEFGH"]
SOURCES = Path("/work/shared/vectors/work-claims/publication-response-loss/manifest.json")
OPS = ("acquire", "publish", "release")


def _sources() -> tuple[bytes, bytes]:
    manifest = json.loads(SOURCES.read_text())
    before, after = (base64.b64decode(f["source_base64"]) for f in manifest["source_files"])
    return before, after


def _setup(path: str) -> None:
    from backends.api import FixedClock, Hooks
    from backends.contract import revision
    from backends.sqlite import SqliteBackend, admin

    admin.provision(path, [NS])
    before, _ = _sources()
    backend = SqliteBackend({"path": path}, FixedClock(None), Hooks())
    backend.store.seed({"clock_floors": [], "claims": [], "publication_outcomes": [], "ledgers": [
        {"ledger_namespace": NS, "item_id": it, "revision": revision(before.replace(BASE_ITEM.encode(), it.encode())),
         "source_base64": base64.b64encode(before.replace(BASE_ITEM.encode(), it.encode())).decode()}
        for it in ITEMS]})
    backend.close()


def worker(path: str, owner: str, item: str, cycles: int, start_at: float) -> dict:
    """Run ``cycles`` successful cycles; return latencies (ns) per op and refusals."""
    from backends.api import Hooks, SystemClock
    from backends.contract import revision
    from backends.sqlite import SqliteBackend

    before, after = (b.replace(BASE_ITEM.encode(), item.encode()) for b in _sources())
    backend = SqliteBackend({"path": path}, SystemClock(), Hooks())
    lat: dict[str, list[int]] = {op: [] for op in OPS}
    refusals = 0
    while time.time() < start_at:
        time.sleep(0.001)
    t_start = time.monotonic_ns()
    done = 0
    while done < cycles:
        rb = backend.call("read", {"ledger_namespace": NS, "item_id": item}).envelope["result"]["read_back"]
        t0 = time.monotonic_ns()
        r = backend.call("acquire", {"ledger_namespace": NS, "item_id": item, "owner_id": owner,
                                     "lease_duration_ms": 600_000,
                                     "expected": {"last_epoch": rb["last_epoch"], "active": rb["active"]}})
        lat["acquire"].append(time.monotonic_ns() - t0)
        if r.exit != 0:
            refusals += 1
            time.sleep(0.002)  # an agent backs off before retrying a held item
            continue
        claim = r.envelope["result"]["claim"]
        with backend.store.transaction(write=False) as txn:
            cur = txn.get_ledger(NS, item)
        cand = after if cur == before else before
        t0 = time.monotonic_ns()
        p = backend.call("publish", {
            "operation_id": f"{owner}-{done}", "ledger_namespace": NS, "item_id": item,
            "expected_revision": revision(cur), "candidate_source_base64": base64.b64encode(cand).decode(),
            "candidate_sha256": revision(cand),
            "claim_fence": {"ledger_namespace": NS, "item_id": item, "owner_id": owner, "epoch": claim["epoch"]}})
        lat["publish"].append(time.monotonic_ns() - t0)
        t0 = time.monotonic_ns()
        rel = backend.call("release", {"ledger_namespace": NS, "item_id": item, "owner_id": owner,
                                       "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"]})
        lat["release"].append(time.monotonic_ns() - t0)
        if p.exit != 0 or rel.exit != 0:
            raise RuntimeError(f"cycle failed: publish {p.envelope}, release {rel.envelope}")
        done += 1
    t_end = time.monotonic_ns()
    backend.close()
    return {"lat": lat, "refusals": refusals, "t_start": t_start, "t_end": t_end}


def run(directory: str, procs: int, shared_item: bool, cycles: int) -> dict:
    path = os.path.join(directory, f"bench-{procs}-{int(shared_item)}.db")
    _setup(path)
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 1.0 + 0.2 * procs  # let every spawned interpreter import first
    with concurrent.futures.ProcessPoolExecutor(max_workers=procs, mp_context=ctx) as pool:
        futs = [pool.submit(worker, path, f"owner-{k}", ITEMS[0] if shared_item else ITEMS[k], cycles, start_at)
                for k in range(procs)]
        results = [f.result() for f in futs]
    wall_s = (max(r["t_end"] for r in results) - min(r["t_start"] for r in results)) / 1e9
    lat = {op: [x for r in results for x in r["lat"][op]] for op in OPS}
    n_ops = sum(len(v) for v in lat.values())
    return {"procs": procs, "shared": shared_item, "cycles": cycles * procs, "wall_s": wall_s, "lat": lat,
            "refusals": sum(r["refusals"] for r in results), "ops_per_s": n_ops / wall_s}


def _ms(values: list[int]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=100) if len(values) > 1 else [values[0]] * 99
    return f"{statistics.mean(values) / 1e6:6.2f} (p99 {q[98] / 1e6:6.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=160, help="successful cycles of the 1-process run (default 160); 8 procs run 1/4, contended 1/8 each")
    parser.add_argument("--dir", default=None, help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="bench-sqlite-", dir=args.dir)
    try:
        rows = [run(directory, 1, False, args.cycles),
                run(directory, 8, False, max(1, args.cycles // 4)),
                run(directory, 8, True, max(1, args.cycles // 8))]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"SQLite backend, synchronous=FULL, rollback journal; {os.cpu_count()} cores, load {load}; "
          "mean ms per op (p99)")
    print(f"{'scenario':<18} {'cycles':>6} {'acquire ms':>20} {'publish ms':>20} {'release ms':>20} "
          f"{'refused':>7} {'ops/s':>8} {'vs 1 proc':>9}")
    base = rows[0]["ops_per_s"]
    for r in rows:
        name = f"{r['procs']} proc{'s' if r['procs'] > 1 else ''}" + (", 1 item" if r["shared"] else "")
        print(f"{name:<18} {r['cycles']:>6} {_ms(r['lat']['acquire']):>20} {_ms(r['lat']['publish']):>20} "
              f"{_ms(r['lat']['release']):>20} {r['refusals']:>7} {r['ops_per_s']:>8.1f} "
              f"{r['ops_per_s'] / base:>8.2f}x")
    print("ops/s counts acquire (incl. refused), publish and release calls over the scenario's wall time.")


if __name__ == "__main__":
    main()
