"""An issue-lock history without worker processes: the real workload generator
against a real store in this process, on logical time (``workloads.interpreter.simulate``).

The store's clock follows the logical clock, so leases expire exactly as the
schedule says; replies are the store's own. Used by the checker tests (each
planted bug must be caught, the correct stores never) and handy for studying
a checker on a small history.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from backends.api import FixedClock
from checkers.history import classify
from workloads.generator import MS, SEC
from workloads.interpreter import simulate
from workloads.issuelock import IssueLockConfig, issuelock_workload

EPOCH_MS = 1_900_000_000_000


def simulate_issuelock(open_store, seed: int = 1, workers: int = 6, seconds: float = 15.0,
                       cfg: IssueLockConfig | None = None, latency_ms: int = 30, directory: str | None = None,
                       keep: bool = False):
    """``(history, ctx)``: ``open_store(directory, clock)`` returns the backend
    (e.g. ``lambda d, c: open_backend({...sqlite in d...}, c)``). The store's
    directory is removed afterwards unless ``keep`` (the history holds the export)."""
    directory = directory or tempfile.mkdtemp(prefix="chaos-issuelock-sim-")
    clock = FixedClock(EPOCH_MS)
    backend = open_store(directory, clock)
    gen, world = issuelock_workload(seed, cfg or IssueLockConfig(), workers)
    backend.store.seed(world.durable())

    def complete(op: dict) -> dict:
        clock.set(EPOCH_MS + op["time"] // MS)
        reply = backend.call(op["f"], op["value"])
        return {"type": classify(reply.exit, reply.envelope), "value": reply.to_json()}

    try:
        history = simulate(gen, seed=seed, workers=workers, complete=complete, time_limit=int(seconds * SEC),
                           latency=latency_ms * MS, nemesis_thread=False)
        history.append({"index": len(history), "process": "nemesis", "type": "info", "f": "final-state",
                        "time": history[-1]["time"] if history else 0,
                        "value": {"durable": backend.store.export_durable()}})
    finally:
        backend.close()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    ctx = {"protocol": "issue-lock", "initial_durable": world.durable(), "ttl_ms": world.ttl_ms}
    return history, ctx


def sqlite_store(factory=None):
    """``open_store`` for the SQLite store (or a planted bug's factory over it)."""
    from backends.registry import open_backend

    def open_store(directory: str, clock):
        spec = {"protocol": "issue-lock", "backend": "sqlite", "path": os.path.join(directory, "locks.db")}
        return factory(spec, clock, None) if factory else open_backend(spec, clock)
    return open_store


def gitfile_store():
    from backends.registry import open_backend

    return lambda directory, clock: open_backend({"protocol": "issue-lock", "backend": "gitfile",
                                                  "root": os.path.join(directory, "store")}, clock)
