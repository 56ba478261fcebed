"""Conformance adapter for a ``"python"``-factory backend built over the SQLite store.

    chaos conform --backend python --factory package.module:open_backend

The factory (registry signature ``open_backend(spec, clock, hooks)``) is
served by a real ``chaos.host`` process per case, exactly like ``--backend
sqlite``: this adapter IS the SQLite adapter (provisioning, seeding, the
bypass writer, the floor-failure trigger, the fsync EIO shim, export read
back from the file by a fresh ``SqliteStore``) with the host opening
``{"backend": "python", "factory": ..., "path": <the case's SQLite file>}``.
So it fits backends that keep their state in the SQLite file they are given
(subclasses of ``backends.sqlite.SqliteBackend``, the mutants of
``chaos.testing.mutants``, ``backends.sqlite:open_backend`` itself); a
factory that stores elsewhere fails the cases whose export it does not see.
"""

from __future__ import annotations

import importlib

from chaos.sut.base import SimpleSession
from chaos.conform.adapters.sqlite import SqliteAdapter
from chaos.errors import UsageError


class PythonSqliteAdapter(SqliteAdapter):
    """The SQLite conformance adapter with the host serving a python factory."""

    backend = "python"

    def __init__(self, factory: str, options: dict | None = None):
        super().__init__(options)
        self.factory = factory
        self.backend = f"python:{factory}"

    def spec(self) -> dict:
        return {**super().spec(), "backend": "python", "factory": self.factory}


def check_factory(factory: str | None) -> str:
    """The factory reference, loadable here; ``UsageError`` (one line) otherwise."""
    if not factory:
        raise UsageError('--backend python needs --factory MODULE:FUNCTION (e.g. "backends.sqlite:open_backend")')
    module, sep, attr = factory.partition(":")
    if not (module and sep and attr):
        raise UsageError(f"--factory {factory!r}: expected MODULE:FUNCTION")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"--factory {factory!r}: cannot load it ({type(e).__name__}: {e})") from None
    if not callable(fn):
        raise UsageError(f"--factory {factory!r}: not a callable")
    return factory


def open_session(options: dict) -> SimpleSession:
    """Checks the factory once, before any case runs (a bad one is a usage error)."""
    check_factory(options.get("factory"))
    return SimpleSession(make_adapter, options)


def make_adapter(options: dict | None = None) -> PythonSqliteAdapter:
    options = dict(options or {})
    return PythonSqliteAdapter(check_factory(options.get("factory")), options)
