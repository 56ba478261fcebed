"""SQLite backends that weaken ``PRAGMA synchronous``: the power-loss nemesis's planted bugs.

Each is the real SQLite backend (``backends.engine.Engine`` over a real
``SqliteStore`` file) opened with a weaker ``synchronous`` setting, as a
registry ``"python"`` backend like the mutants of ``chaos.testing.mutants``::

    chaos run --backend python --factory chaos.testing.sync_variants:open_sync_off --nemesis power-loss

* ``sync-off`` (``synchronous=OFF``): SQLite never fsyncs; a power loss
  undoes every commit since the last checkpoint the OS happened to make (with
  the shim: all of them).
* ``sync-full`` (``synchronous=FULL``, what ``SqliteStore`` used before the
  power-loss shim showed it): in DELETE mode the journal's unlink, which is the
  commit, is not followed by a directory fsync, so a power loss right after a
  commit brings the hot journal back and rolls the acknowledged transaction back.

Neither breaks anything a crash (SIGKILL) can show: the page cache survives a
crash, only a power loss drops it. The durability checker names both.
"""

from __future__ import annotations

from backends.api import Clock, Hooks
from backends.sqlite import SqliteBackend
from backends.sqlite.store import SqliteStore


class WeakSync(SqliteBackend):
    synchronous = "EXTRA"

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.store.close()
        self.store = SqliteStore(spec["path"], synchronous=self.synchronous)


class SyncOff(WeakSync):
    synchronous = "OFF"


class SyncFull(WeakSync):
    synchronous = "FULL"


#: name -> (factory, what is broken); the durability checker names each under ``power-loss``
VARIANTS = {
    "sync-off": ("chaos.testing.sync_variants:open_sync_off", "SQLite synchronous=OFF: commits are never fsynced"),
    "sync-full": ("chaos.testing.sync_variants:open_sync_full",
                  "SQLite synchronous=FULL in DELETE mode: the journal unlink (the commit) is not made durable"),
}


def open_sync_off(spec, clock, hooks):
    return SyncOff(spec, clock, hooks)


def open_sync_full(spec, clock, hooks):
    return SyncFull(spec, clock, hooks)
