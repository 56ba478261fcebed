"""Harness overhead: ops/s through the full harness (interpreter, slots,
history file) against a plain loop of the same worker host processes calling
the same SQLite backend, at 10 and 50 workers. Prints both and their ratio.

    .venv/bin/python benchmarks/harness_overhead.py [--seconds 3] [--workers 10,50]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from backends.registry import open_backend
from chaos.driver import RealDriver
from chaos.history_store import HistoryWriter
from chaos.host import HostClient
from chaos.worker import Slot
from workloads.claims import ClaimsConfig, claims_workload
from workloads.generator import SEC, clients, deadline, repeat
from workloads.interpreter import interpret


def setup(d: str):
    _, world = claims_workload(1, ClaimsConfig(namespaces=1, items=4))
    spec = {"backend": "sqlite", "path": os.path.join(d, "c.db"), "namespaces": list(world.namespaces)}
    b = open_backend(spec)
    b.store.seed(world.durable())
    b.close()
    ns, item = world.tuples[0]
    return spec, {"ledger_namespace": ns, "item_id": item}


def plain(spec, req, workers: int, seconds: float) -> float:
    cls = HostClient
    hosts = [cls(spec) for _ in range(workers)]
    count = [0] * workers
    stop = time.monotonic() + seconds

    def loop(i):
        while time.monotonic() < stop:
            hosts[i].call("read", req, timeout=10)
            count[i] += 1
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    for h in hosts:
        h.kill()
    return sum(count) / elapsed


def harness(spec, req, workers: int, seconds: float, d: str) -> float:
    history = HistoryWriter(os.path.join(d, f"h-{workers}.jsonl"))
    stop = threading.Event()
    driver = RealDriver(history, [], None, 0, stop)
    slots = [Slot(t, spec, lambda t: {}, d, driver.completions, 10.0, lambda pid: None) for t in range(workers)]
    driver.slots = slots
    for s in slots:
        s.ensure_started()
    driver.t0 = time.monotonic_ns()
    gen = clients(deadline(int(seconds * SEC), repeat({"f": "read", "value": req})))
    t0 = time.monotonic()
    interpret(gen, list(range(workers)), driver)
    elapsed = time.monotonic() - t0
    for s in slots:
        s.stop()
        s.kill()
    history.close()
    return driver.ops / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workers", default="10,50")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-bench-") as d:
        spec, req = setup(d)
        print(f"{'workers':>7} {'plain ops/s':>12} {'harness ops/s':>14} {'harness/plain':>14}")
        for n in (int(x) for x in args.workers.split(",")):
            p = plain(spec, req, n, args.seconds)
            h = harness(spec, req, n, args.seconds, d)
            print(f"{n:>7} {p:>12.0f} {h:>14.0f} {h / p:>14.2f}")


if __name__ == "__main__":
    main()
