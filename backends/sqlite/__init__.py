"""The strict-fenced SQLite backend: one SQLite file is the coordinator.

``open_backend(spec, clock, hooks)`` returns the shared ``backends.engine``
decision logic over a ``SqliteStore``. Spec keys:

* ``path`` (required): the coordinator file;
* ``namespaces``: allowlist used to provision the file when it is new;
* ``name`` (default ``sqlite-strict-fenced``), ``write_paths``: provisioning
  of a new file (an existing file keeps what it was provisioned with).

The configuration (and therefore the capability the contract module derives)
is read back from the file, so it is what the file really delivers: a bypass
writer enabled with ``admin.enable_bypass_writer`` makes every process that
opens the file report advisory.
"""

from __future__ import annotations

import logging
import sqlite3

from backends.api import Backend, Clock, Hooks, StoreUnavailable
from backends.contract.records import BackendConfig
from backends.engine import Engine
from backends.sqlite import admin, schema
from backends.sqlite.store import SqliteStore, unavailable

log = logging.getLogger(__name__)

__all__ = ["SqliteBackend", "SqliteStore", "open_backend", "config_for"]


class SpecMismatch(ValueError):
    """The spec asks for a provisioning that contradicts the existing file."""


def _unprovisioned_config(spec: dict) -> BackendConfig:
    return BackendConfig(
        name=spec.get("name", schema.DEFAULT_NAME),
        namespaces=list(spec.get("namespaces") or []),
        write_paths=dict(spec.get("write_paths") or schema.FENCED_WRITE_PATHS),
    )


def config_for(spec: dict) -> BackendConfig:
    """Provision ``spec["path"]`` if it is new, then read its configuration.

    A missing file with no ``namespaces`` in the spec is not created: the
    backend then parses requests against an empty allowlist and every store
    access answers exit 6 ``claim-store-unavailable`` (``database-not-found``).
    A file whose provisioning cannot be read (locked, not a database, an I/O
    error) is not repaired, and its allowlist is unknown: ``sqlite3.Error``
    propagates, and ``SqliteBackend`` answers each call that needs the
    configuration ``claim-store-unavailable`` until a read succeeds. An empty
    allowlist instead answered a bound namespace ``ledger-namespace-unbound``,
    a definite rejection, whenever the per-call process of a black-box run
    met such an error (a hot journal it could not roll back while fsync
    failed: the red team, seed 2, 6 replies in one run).
    """
    path = spec["path"]
    if not admin.is_provisioned(path):
        if not spec.get("namespaces"):
            return _unprovisioned_config(spec)
        admin.provision(path, spec["namespaces"], name=spec.get("name", schema.DEFAULT_NAME),
                        write_paths=spec.get("write_paths"))
    config = admin.read_config(path)
    wanted = spec.get("namespaces")
    if wanted is not None and list(wanted) != config.namespaces:
        raise SpecMismatch(f"{path} is provisioned for {config.namespaces}, the spec asks for {list(wanted)}")
    return config


class SqliteBackend(Engine):
    """The engine over a ``SqliteStore``. ``restart()`` drops every connection
    and re-reads the provisioning, so a bypass writer enabled meanwhile is
    reported from then on. A provisioning that cannot be read is read again
    at the next call, which meanwhile answers ``claim-store-unavailable``
    (``config_for``)."""

    @property
    def config(self) -> BackendConfig:
        if self._config is None:
            try:
                self._config = self.configured(config_for(self.spec))
            except sqlite3.Error as e:
                log.warning("cannot read provisioning of %s: %s", self.spec["path"], e)
                raise unavailable(e, "provisioning") from e
        return self._config

    @config.setter
    def config(self, value: BackendConfig | None) -> None:
        self._config = value

    def configured(self, config: BackendConfig) -> BackendConfig:
        """The configuration as read from the file, as this backend serves it
        (a subclass that reports something else changes it here)."""
        return config

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        self.spec = dict(spec)
        super().__init__(SqliteStore(spec["path"]), None, clock, hooks)
        try:
            self.config  # noqa: B018 - read now: a spec that contradicts the file fails here
        except StoreUnavailable:
            pass  # read again by the first call, which answers claim-store-unavailable meanwhile

    def restart(self) -> None:
        super().restart()
        self.config = None


def open_backend(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    return SqliteBackend(spec, clock, hooks)
