"""A backend author's first try: the engine over a dict in this process's
memory (``MemoryStore``). Correct in one process; every worker of a run is
its own process, so nothing one acquires is seen by the others."""

from backends.engine import Engine
from backends.reference import config_from_spec
from backends.reference.memory_store import MemoryStore


def open_backend(spec, clock, hooks):
    return Engine(MemoryStore(), config_from_spec(spec), clock, hooks)
