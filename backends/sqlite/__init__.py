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

from backends.api import Backend, BackendConfig, Clock, Hooks
from backends.engine import Engine
from backends.sqlite import admin, schema
from backends.sqlite.store import SqliteStore

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

    A missing file with no ``namespaces`` in the spec is not created, and an
    unreadable file is not repaired: the backend then parses requests against
    the spec's allowlist (empty without one) and every store access answers
    exit 6 ``claim-store-unavailable`` (``database-not-found`` /
    ``database-unopenable``): no decision is ever made without the store.
    """
    path = spec["path"]
    try:
        if not admin.is_provisioned(path):
            if not spec.get("namespaces"):
                return _unprovisioned_config(spec)
            admin.provision(path, spec["namespaces"], name=spec.get("name", schema.DEFAULT_NAME),
                            write_paths=spec.get("write_paths"))
        config = admin.read_config(path)
    except sqlite3.Error as e:
        log.warning("cannot read provisioning of %s: %s", path, e)
        return _unprovisioned_config(spec)
    wanted = spec.get("namespaces")
    if wanted is not None and list(wanted) != config.namespaces:
        raise SpecMismatch(f"{path} is provisioned for {config.namespaces}, the spec asks for {list(wanted)}")
    return config


class SqliteBackend(Engine):
    """The engine over a ``SqliteStore``. ``restart()`` drops every connection
    and re-reads the provisioning, so a bypass writer enabled meanwhile is
    reported from then on."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        self.spec = dict(spec)
        super().__init__(SqliteStore(spec["path"]), config_for(spec), clock, hooks)

    def restart(self) -> None:
        super().restart()
        self.config = config_for(self.spec)


def open_backend(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    return SqliteBackend(spec, clock, hooks)
