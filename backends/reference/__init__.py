"""The reference backend: the engine over an in-memory store, no I/O.

It is the oracle the conformance vectors prove (tests/test_reference_vectors.py)
and the model the checkers trust. ``open_backend(spec, clock, hooks)`` follows
the registry convention; spec keys: ``namespaces`` (required), ``name``,
``write_paths``, ``coordination_scope``, ``durability``, ``profile``,
``faults`` (store fault map, vectors.md §6) and ``durable`` (a manifest-shaped
state to seed).
"""

from __future__ import annotations

from backends.api import Clock, Hooks, SystemClock
from backends.contract.records import BackendConfig
from backends.engine import Engine
from backends.reference.memory_store import MemoryStore, MemoryTxn


class ReferenceBackend(Engine):
    """``Engine`` + ``MemoryStore``. ``restart()`` keeps the store (it is the
    durable coordinator) and drops only engine process memory."""

    def __init__(self, config: BackendConfig, clock: Clock | None = None, hooks: Hooks | None = None,
                 store: MemoryStore | None = None):
        super().__init__(store if store is not None else MemoryStore(), config,
                         clock if clock is not None else SystemClock(), hooks)

    @property
    def faults(self) -> dict:
        return self.store.faults


def config_from_spec(spec: dict) -> BackendConfig:
    config = BackendConfig(name=spec.get("name", "reference-backend"), namespaces=list(spec["namespaces"]))
    for key in ("coordination_scope", "durability", "profile"):
        if key in spec:
            setattr(config, key, spec[key])
    if "write_paths" in spec:
        config.write_paths = dict(spec["write_paths"])
    return config


def open_backend(spec: dict, clock: Clock | None = None, hooks: Hooks | None = None) -> ReferenceBackend:
    store = MemoryStore(faults=spec.get("faults"))
    if spec.get("durable"):
        store.seed(spec["durable"])
    return ReferenceBackend(config_from_spec(spec), clock, hooks, store)


__all__ = ["MemoryStore", "MemoryTxn", "ReferenceBackend", "config_from_spec", "open_backend"]
