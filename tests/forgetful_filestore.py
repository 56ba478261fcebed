"""The guide's JSON-file store with the bug it once had: ``export_durable``
reports the empty per-transaction memory instead of the file."""

from backends.engine import Engine
from backends.reference import config_from_spec
from backends.reference.memory_store import MemoryStore
from chaos.testing.filestore import JsonFileStore


class ForgetfulStore(JsonFileStore):
    def export_durable(self) -> dict:
        return MemoryStore.export_durable(self)


def open_backend(spec, clock, hooks):
    return Engine(ForgetfulStore(spec["path"]), config_from_spec(spec), clock, hooks)
