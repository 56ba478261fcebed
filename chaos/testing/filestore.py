"""A complete small Python backend: the engine over one JSON file (docs/backend-authors.md).

This is the worked example of the ``"python"`` registry entry. It keeps the
whole durable state in one JSON file in the manifest's ``durable`` shape;
``fcntl.flock`` on a side lock file is the serialized decision boundary
shared by every worker process; a write transaction rewrites the file
(temp file + fsync + rename + directory fsync) before the lock is released.
The decisions, envelopes and codes all come from ``backends.engine`` and
``backends.contract``: a backend only supplies storage.

    {"backend": "python", "factory": "chaos.testing.filestore:open_backend",
     "path": "/tmp/x/state.json", "namespaces": ["wbns_..."]}
"""

from __future__ import annotations

import fcntl
import json
import os
import random

from backends.api import Clock, CommitOutcomeUnknown, Hooks
from backends.engine import Engine
from backends.reference import config_from_spec
from backends.reference.memory_store import MemoryStore, MemoryTxn


class JsonFileStore(MemoryStore):
    """The durable state lives in ``path``; memory is only a per-transaction copy."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def transaction(self, write: bool) -> "FileTxn":
        return FileTxn(self, write)

    def load(self) -> None:
        for table in (self.floors, self.claims, self.ledgers, self.outcomes):
            table.clear()
        if os.path.exists(self.path):
            with open(self.path) as f:
                super().seed(json.load(f))

    def tmp_path(self) -> str:
        return f"{self.path}.tmp"

    def save(self) -> None:
        tmp = self.tmp_path()
        with open(tmp, "w") as f:
            json.dump(super().export_durable(), f)   # the in-memory copy being committed
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def seed(self, durable: dict) -> None:
        with self.transaction(write=True):
            super().seed(durable)

    def export_durable(self) -> dict:
        """The durable projection as the FILE holds it (memory is only a
        per-transaction copy: exporting it would report nothing stored)."""
        with self.transaction(write=False):
            return super().export_durable()


class FileTxn(MemoryTxn):
    """flock (shared to read, exclusive to write) -> load -> decide -> save -> unlock."""

    def __enter__(self):
        self._fd = os.open(f"{self._store.path}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX if self._write else fcntl.LOCK_SH)
        self._store.load()
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        try:
            super().__exit__(exc_type, exc, tb)      # applies the buffered writes in memory
            if exc_type is None and self._write:
                try:
                    self._store.save()
                except OSError as e:              # the rename may or may not have happened
                    raise CommitOutcomeUnknown(f"state file not saved: {e}") from e
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
        return False


class UnlockedFileTxn(FileTxn):
    """PLANTED BUG (a concurrency bug): no flock around load -> decide -> save. Two workers that
    interleave between one's load and its save both decide from the same state, and the later
    save overwrites the earlier decision (two owners of one epoch, a lost epoch). Only a rare
    interleaving shows it; the deterministic mode finds it from a seed and replays it."""

    def __enter__(self):
        self._store.load()
        return MemoryTxn.__enter__(self)

    def __exit__(self, exc_type, exc, tb):
        MemoryTxn.__exit__(self, exc_type, exc, tb)
        if exc_type is None and self._write:
            try:
                self._store.save()
            except OSError as e:
                raise CommitOutcomeUnknown(f"state file not saved: {e}") from e
        return False


class UnlockedFileStore(JsonFileStore):
    def transaction(self, write: bool) -> "FileTxn":
        return UnlockedFileTxn(self, write)

    def tmp_path(self) -> str:
        # its own temp file per save (unlocked saves would otherwise interleave inside one file); named
        # from Python's random, which a deterministic worker seeds from its name
        return f"{self.path}.{random.getrandbits(32):08x}.tmp"


def open_unlocked(spec: dict, clock: Clock, hooks: Hooks) -> Engine:
    """The file store without its lock (the planted concurrency bug above)."""
    store = UnlockedFileStore(spec["path"])
    return Engine(store, config_from_spec(spec), clock, hooks)


def open_backend(spec: dict, clock: Clock, hooks: Hooks) -> Engine:
    store = JsonFileStore(spec["path"])
    if spec.get("durable") and not os.path.exists(spec["path"]):
        store.seed(spec["durable"])
    return Engine(store, config_from_spec(spec), clock, hooks)
