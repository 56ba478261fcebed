"""Real worker slots on a seeded SQLite store, with the fault env the nemesis
steps act on: the shared setup of the nemesis-step tests."""

from __future__ import annotations

import queue
import time

from backends.registry import open_backend
from chaos.driver import FaultEnv
from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage
from chaos.worker import Slot
from workloads.claims import ClaimsConfig, claims_workload


def seeded_sqlite(tmp_path) -> tuple[dict, object]:
    """(spec, world) of a one-item SQLite store seeded with the workload's tuples."""
    _, world = claims_workload(1, ClaimsConfig(namespaces=1, items=1))
    spec = {"backend": "sqlite", "path": str(tmp_path / "c.db"), "namespaces": list(world.namespaces)}
    b = open_backend(spec)
    b.store.seed(world.durable())
    b.close()
    return spec, world


def slot_env(tmp_path, nemeses: list[str], workers: int = 2, env_for=lambda _t: {}) -> tuple[FaultEnv, HistoryWriter]:
    """A FaultEnv over ``workers`` real slots (hosts start on demand); close the history and kill the slots after."""
    spec, _ = seeded_sqlite(tmp_path)
    (tmp_path / "logs").mkdir(exist_ok=True)
    slots = [Slot(t, spec, env_for, str(tmp_path / "logs"), queue.Queue(), 10.0, lambda pid: None)
             for t in range(workers)]
    history = HistoryWriter(str(tmp_path / "history.jsonl"))
    return FaultEnv(slots, {}, None, Coverage(nemeses), history, time.monotonic_ns()), history
