"""Conformance adapter for the strict-fenced SQLite backend: a real file in a
temp dir, served by a ``chaos.host`` process (see ``hosted.py``).

Storage mechanisms (vectors.md §11):

* provision + seed through the privileged admin path before the host starts;
* CFG: ``alternate: "bypass"`` enables the real uncoordinated writer
  (``admin.enable_bypass_writer``) and exercises it once with the seeded
  bytes, so the advisory configuration is a working bypass, not a label; a
  missing entry in ``write_paths`` is provisioned as missing (the legacy entry
  point still exists in the engine, it is just not enumerated);
* CFP: the adapter-installed floor trigger (``admin.install_floor_failure_trigger``);
* POU: the fsync EIO shim preloaded into the host and armed on the database
  file right before the commit and disarmed right after, so SQLite's COMMIT
  really fails with SQLITE_IOERR_FSYNC and the transaction rolls back;
* export: the file is read by a fresh ``SqliteStore`` after the host stopped.
"""

from __future__ import annotations

import copy

from backends.sqlite import admin, schema
from backends.sqlite.store import SqliteStore
from chaos.conform.adapters.base import Profile
from chaos.conform.adapters.hosted import HostedAdapter

#: the write-path values this backend can really be configured with
class SqliteAdapter(HostedAdapter):
    backend = "sqlite"

    def __init__(self, options: dict | None = None):
        super().__init__(options)
        self.profile = Profile(backend_name=schema.DEFAULT_NAME, exports_requests=True, commit_sequence=True)
        self.path = str(self.dir / "claims.db")
        self.namespaces: list[str] = []
        self.fsync = None

    def not_applicable(self, case) -> str | None:
        reason = self.unsupported_write_path(case, schema.FENCED_WRITE_PATHS)
        if reason is not None:
            return reason
        b = case.initial["backend"]
        if (b["coordination_scope"], b["durability"]) != ("shared-transactional-coordinator", "durable-coordinator"):
            return "sqlite is always a shared transactional durable coordinator"
        return None

    def prepare(self, case) -> None:
        b = case.initial["backend"]
        self.namespaces = list(b["ledger_binding"]["namespaces"])
        paths = dict(b["write_paths"])
        bypass = paths.get("alternate") == "bypass"
        if bypass:
            paths["alternate"] = "none"  # the real enabling step below records it
        admin.provision(self.path, self.namespaces, name=schema.DEFAULT_NAME, write_paths=paths)
        store = SqliteStore(self.path)
        try:
            store.seed(copy.deepcopy(case.initial["durable"]))
        finally:
            store.close()
        if bypass:
            admin.enable_bypass_writer(self.path)
            self._exercise_bypass(case)
        if self._needs_fsync_fault(case):
            from chaos.faults.failsync import FsyncFault

            self.fsync = FsyncFault(str(self.dir / "failsync.ctl"), match=self.path)

    def _exercise_bypass(self, case) -> None:
        """Write the seeded bytes back through the bypass: proves the
        uncoordinated path works without changing any state."""
        from backends.contract.values import decode_canonical_base64

        for led in case.initial["durable"]["ledgers"]:
            admin.direct_write(self.path, led["ledger_namespace"], led["item_id"],
                               decode_canonical_base64(led["source_base64"]))

    @staticmethod
    def _needs_fsync_fault(case) -> bool:
        return case.initial["faults"].get("publication-outcome-unknown") is True or any(
            a.get("target") == "publication-outcome-unknown" for a in case.actions)

    def spec(self) -> dict:
        return {"backend": "sqlite", "path": self.path, "namespaces": self.namespaces,
                "clock_file": self.clock_file}

    def host_env(self) -> dict:
        return self.fsync.env() if self.fsync is not None else {}

    def arm_sticky_fault(self, name: str) -> None:
        admin.install_floor_failure_trigger(self.path)

    def arm_commit_fault(self) -> None:
        self.fsync.arm()

    def disarm_commit_fault(self) -> None:
        self.fsync.disarm()

    def export_storage(self) -> dict:
        store = SqliteStore(self.path)
        try:
            return store.export_durable()
        finally:
            store.close()

    def teardown_storage(self) -> None:
        if self.fsync is not None:
            self.fsync.cleanup()


def make_adapter(options: dict | None = None) -> SqliteAdapter:
    return SqliteAdapter(options)
