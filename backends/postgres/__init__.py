"""The strict-fenced PostgreSQL backend: a real PostgreSQL server is the coordinator.

``open_backend(spec, clock, hooks)`` returns the shared ``backends.engine``
decision logic over a ``PostgresStore``. Spec keys:

* ``dsn`` (required): libpq DSN of the server;
* ``schema``: the store's own PostgreSQL schema. Omitted: a fresh
  ``claimchaos_<hex>`` is created (pass the same name to every process that
  must share the store). An existing schema is used only if it carries the
  claim-chaos marker; nothing outside it is ever touched;
* ``namespaces``: the allowlist used to provision a new schema;
* ``name`` (default ``postgres-strict-fenced``), ``write_paths``: provisioning
  of a new schema (an existing schema keeps what it was provisioned with, so a
  bypass writer enabled by ``admin.enable_bypass_writer`` is reported);
* ``deadline_s`` (default 5): per-transaction deadline; a paused or
  unreachable server ends the operation as indeterminate, never hangs;
* ``commit_cut_file``: the one-shot POU fault (see ``PostgresStore``);
* ``provisioned`` (default false): the schema exists and is provisioned (a
  run's worker hosts: the run provisioned it first). Opening then never
  touches the server; the first call connects and reads the provisioning, and
  a server that is down then answers that call ``claim-store-unavailable``.
  (A host started while a nemesis held the server down exited at once, and
  every op of its worker ended ``info``: at load 10 a 60-s docker run
  completed no acquire.)

Authoritative clock: the service's (this process's ``Clock``), never the
database's ``now()``; see ``backends.postgres.store``.
"""

from __future__ import annotations

import psycopg

from backends.api import Backend, Clock, Hooks, StoreUnavailable
from backends.contract.records import BackendConfig
from backends.engine import Engine
from backends.postgres import admin, errors
from backends.postgres.store import PostgresStore

__all__ = ["PostgresBackend", "PostgresStore", "open_backend", "config_for"]


class SpecMismatch(ValueError):
    """The spec asks for a provisioning that contradicts the existing schema."""


def config_for(spec: dict, store: PostgresStore) -> BackendConfig:
    """Provision the store's schema if new, then read its configuration back."""
    config = admin.read_config(spec["dsn"], store.schema)
    if config is None:
        admin.provision(spec["dsn"], store.schema, spec.get("namespaces", []),
                        name=spec.get("name", admin.DEFAULT_NAME), write_paths=spec.get("write_paths"))
        config = admin.read_config(spec["dsn"], store.schema)
    wanted = spec.get("namespaces")
    if wanted is not None and list(wanted) != config.namespaces:
        raise SpecMismatch(f"schema {store.schema} is provisioned for {config.namespaces}, the spec asks for {list(wanted)}")
    return config


class PostgresBackend(Engine):
    """The engine over a ``PostgresStore``. ``restart()`` drops the connection
    and re-reads the provisioning at the next call: a restart never waits on
    the server (a paused server held the restart, and the nemesis with it, for
    the nemesis step's whole bound)."""

    @property
    def config(self) -> BackendConfig:
        if self._config is None:
            try:
                self._config = config_for(self.spec, self.store)
            except psycopg.Error as e:  # the call that needed it answers claim-store-unavailable
                raise StoreUnavailable(errors.connect_failure_reason(e), str(e).strip()) from e
        return self._config

    @config.setter
    def config(self, value: BackendConfig | None) -> None:
        self._config = value

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        if not spec.get("dsn"):
            raise ValueError("postgres backend spec needs 'dsn'")
        self.spec = dict(spec)
        provisioned = bool(spec.get("provisioned"))
        if provisioned and not spec.get("schema"):
            raise ValueError("postgres backend spec: 'provisioned' needs the 'schema' it names")
        store = PostgresStore(spec["dsn"], spec.get("schema"), namespaces=spec.get("namespaces", []),
                              deadline_s=float(spec.get("deadline_s", 5.0)),
                              commit_cut_file=spec.get("commit_cut_file"), provision=not provisioned)
        self.spec["schema"] = store.schema
        super().__init__(store, None if provisioned else config_for(self.spec, store), clock, hooks)

    def restart(self) -> None:
        super().restart()
        self.config = None


def open_backend(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    return PostgresBackend(spec, clock, hooks)
