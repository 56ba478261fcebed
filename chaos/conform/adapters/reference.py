"""Conformance adapter for the in-memory reference backend (the oracle).

Mechanisms (vectors.md §11): the engine over ``MemoryStore`` in this process;
the clock is a ``FixedClock`` pinned per action; the barrier is a blocking
``Hooks.before_commit`` in a worker thread; reply loss is ``after_commit``
raising ``ReplyLost``; ``clock_floor_persist`` and
``publication-outcome-unknown`` are the store's fault flags; restart is
``backend.restart()`` plus abandoning parked calls.
"""

from __future__ import annotations

import copy

from backends.api import FixedClock
from backends.contract.records import Reply
from backends.reference import open_backend
from chaos.conform.adapters.base import Parked, Profile
from chaos.conform.adapters.threaded import ConformHooks, abandon_all, finish_parked, start_parked

STORE_FAULTS = ("clock_floor_persist", "publication-outcome-unknown")


class ReferenceAdapter:
    def __init__(self, options: dict | None = None):
        self.profile = Profile(backend_name="reference-backend", exports_requests=True, commit_sequence=True)
        self.clock = FixedClock()
        self.hooks = ConformHooks()
        self.backend = None
        self._armed_unknown = False

    def not_applicable(self, case) -> str | None:
        return None  # every configuration is plain data here

    def adjust_expected(self, case, expected: dict) -> list[str]:
        return []

    def setup(self, case, clock_ms: int) -> None:
        b = case.initial["backend"]
        self.profile.backend_name = b["name"]
        spec = {"backend": "reference", "name": b["name"], "namespaces": list(b["ledger_binding"]["namespaces"]),
                "coordination_scope": b["coordination_scope"], "durability": b["durability"],
                "write_paths": dict(b["write_paths"]), "durable": copy.deepcopy(case.initial["durable"])}
        self.clock.set(clock_ms)
        self.backend = open_backend(spec, self.clock, self.hooks)
        for name, armed in case.initial["faults"].items():
            if armed:
                self.arm_fault(name)

    def set_clock(self, ms: int) -> None:
        self.clock.set(ms)

    def call(self, op: str, request: dict) -> Reply:
        return self.backend.call(op, request)

    def start_publish(self, request: dict) -> Reply | Parked:
        return start_parked(self.hooks, self.backend.call, request)

    def finish_publish(self, parked: Parked) -> Reply:
        return finish_parked(self.hooks, parked)

    def arm_fault(self, name: str) -> None:
        if name in STORE_FAULTS:
            self.backend.store.faults[name] = True
        elif name == "claim-response-loss":
            self.hooks.lose.add("claim")
        elif name == "publication-response-loss":
            self.hooks.lose.add("publish")
        else:
            raise ValueError(f"unknown fault {name!r}")

    def take_fired(self, name: str) -> bool:
        # the store marks a fired one-shot False (it is still in its map)
        return self.backend.store.faults.get(name) is False

    def restart(self) -> None:
        abandon_all(self.hooks)
        self.backend.restart()

    def export(self) -> dict:
        return self.backend.store.export_durable()

    def close(self) -> None:
        if self.backend is not None:
            abandon_all(self.hooks)
            self.backend.close()


def make_adapter(options: dict | None = None) -> ReferenceAdapter:
    return ReferenceAdapter(options)
