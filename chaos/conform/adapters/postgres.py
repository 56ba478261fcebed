"""Conformance adapter for the strict-fenced PostgreSQL backend.

One real PostgreSQL server per ``chaos conform`` invocation (the session
starts it and ``close()`` removes it: no process or directory left), one
fresh schema per case, the backend served by a ``chaos.host`` process (see
``hosted.py`` for clock, barrier, reply loss).

Storage mechanisms (vectors.md §11):

* provision + seed through the privileged admin path before the host starts;
* RST: a REAL server crash (SIGKILL of the whole postmaster tree, crash
  recovery on start) plus SIGKILL of the host and a fresh host;
* CFP: the adapter-installed trigger raising on the floor table;
* POU (§11.6): the store's ``commit_cut_file`` switch: armed right before the
  commit, the store cuts its own connection as ``COMMIT`` is sent, so the
  server aborts the transaction while the service sees a dead connection at
  COMMIT and must answer ``state: "unknown"``;
* CFG: the real bypass writer (``admin.enable_bypass_writer`` +
  ``direct_write``); a missing ``write_paths`` entry is provisioned missing;
* export: a fresh ``PostgresStore`` reader after the host stopped.
"""

from __future__ import annotations

import copy
import os

from backends.contract.values import decode_canonical_base64
from backends.postgres import admin
from backends.postgres import schema as pg_schema
from backends.postgres.store import PostgresStore
from chaos.conform.adapters.base import Profile
from chaos.conform.adapters.hosted import HostedAdapter
from chaos.errors import UsageError


class PostgresAdapter(HostedAdapter):
    backend = "postgres"

    def __init__(self, server, options: dict | None = None):
        super().__init__(options)
        self.server = server
        self.profile = Profile(backend_name=admin.DEFAULT_NAME, exports_requests=True)
        self.schema = pg_schema.random_schema_name()
        self.cut_file = str(self.dir / "commit-cut")
        self.namespaces: list[str] = []
        self.prepared = False

    def not_applicable(self, case) -> str | None:
        return self.unsupported_write_path(case, admin.FENCED_WRITE_PATHS)

    def dsn(self) -> str:
        return self.server.dsn()

    def prepare(self, case) -> None:
        b = case.initial["backend"]
        self.namespaces = list(b["ledger_binding"]["namespaces"])
        paths = dict(b["write_paths"])
        bypass = paths.get("alternate") == "bypass"
        if bypass:
            paths["alternate"] = "none"  # recorded by the real enabling step below
        store = PostgresStore(self.dsn(), self.schema, namespaces=self.namespaces)
        self.prepared = True
        try:
            admin.provision(self.dsn(), self.schema, self.namespaces, name=admin.DEFAULT_NAME, write_paths=paths)
            store.seed(copy.deepcopy(case.initial["durable"]))
        finally:
            store.close()
        if bypass:
            admin.enable_bypass_writer(self.dsn(), self.schema)
            for led in case.initial["durable"]["ledgers"]:  # the bypass really writes (same bytes)
                admin.direct_write(self.dsn(), self.schema, led["ledger_namespace"], led["item_id"],
                                   decode_canonical_base64(led["source_base64"]))

    def spec(self) -> dict:
        return {"backend": "postgres", "dsn": self.dsn(), "schema": self.schema, "namespaces": self.namespaces,
                "clock_file": self.clock_file, "commit_cut_file": self.cut_file}

    def arm_sticky_fault(self, name: str) -> None:
        admin.install_floor_failure_trigger(self.dsn(), self.schema)

    def arm_commit_fault(self) -> None:
        with open(self.cut_file, "w"):
            pass

    def disarm_commit_fault(self) -> None:
        try:
            os.unlink(self.cut_file)  # gone already when the store fired it
        except FileNotFoundError:
            pass

    def restart(self) -> None:
        """A real crash of the whole server tree, crash recovery, fresh host."""
        self._kill_host()
        self.server.restart(crash=True)
        self._fresh_host()

    def export_storage(self) -> dict:
        store = PostgresStore(self.dsn(), self.schema)
        try:
            return store.export_durable()
        finally:
            store.close()

    def teardown_storage(self) -> None:
        if self.prepared and self.server.running():
            PostgresStore(self.dsn(), self.schema).drop_created()


class PostgresSession:
    """One server for every case of a ``chaos conform`` run."""

    def __init__(self, options: dict):
        from chaos.faults.pgserver import PgServer, find_bindir

        if find_bindir() is None:
            raise UsageError("postgres: no PostgreSQL server binaries found (set CLAIM_CHAOS_PG_BINDIR)")
        self.options = options
        self.server = PgServer()

    def new_adapter(self) -> PostgresAdapter:
        if not self.server.running():  # a previous case may have left it crashed
            self.server.start()
        return PostgresAdapter(self.server, self.options)

    def close(self) -> None:
        self.server.cleanup()


def open_session(options: dict) -> PostgresSession:
    return PostgresSession(options)
