"""Conformance adapter for a ``"python"``-factory backend (an outside class).

    chaos conform --backend python --factory package.module:open_backend

The factory (registry signature ``open_backend(spec, clock, hooks)``) is
served by a real ``chaos.host`` process per case, like every hosted backend
(file clock, real barrier at the engine's ``before_commit`` hook, SIGKILL
restart, exit-after-commit reply loss). Its spec carries the case's
configuration (``namespaces``, ``write_paths``, ``name``) and one storage
path in the case's temp dir (``path``: the factory decides what lives there).
The privileged steps use the ``Store`` protocol the factory's backend exposes
(``backend.store``): ``seed(durable)`` before the host serves, and
``export_durable()`` by a fresh in-process open after it stopped.

``probe(factory)`` opens the factory once on a scratch path: a backend over
``backends.sqlite.SqliteStore`` (``SqliteBackend`` subclasses, the mutants of
``chaos.testing.mutants``) gets the SQLite adapter's real mechanisms (the
floor trigger, the bypass writer, the fsync shim on its file). Any other
store gets the generic ones: the fsync EIO shim on its storage path for an
unknown commit outcome; no floor trigger and no bypass writer exist there, so
those cases are not applicable (``chaos.sut.python`` declares it).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile

from backends.api import FixedClock, Hooks
from chaos.conform.adapters.base import Profile
from chaos.conform.adapters.hosted import HostedAdapter
from chaos.conform.adapters.sqlite import SqliteAdapter
from chaos.errors import UsageError
from chaos.sut.base import SimpleSession

_probed: dict[str, str] = {}


class PythonSqliteAdapter(SqliteAdapter):
    """The SQLite conformance adapter with the host serving a python factory."""

    backend = "python"

    def __init__(self, factory: str, options: dict | None = None):
        super().__init__(options)
        self.factory = factory
        self.backend = f"python:{factory}"

    def spec(self) -> dict:
        return {**super().spec(), "backend": "python", "factory": self.factory}


class PythonStoreAdapter(HostedAdapter):
    """Any factory whose backend exposes the ``Store`` protocol as ``.store``."""

    backend = "python"

    def __init__(self, factory: str, options: dict | None = None):
        super().__init__(options)
        self.factory = factory
        self.path = str(self.dir / "state")
        self.config: dict = {}
        self.fsync = None
        self.profile = Profile(backend_name="", exports_requests=True)

    def not_applicable(self, case) -> str | None:
        b = case.initial["backend"]
        if (b["coordination_scope"], b["durability"]) != ("shared-transactional-coordinator", "durable-coordinator"):
            return "a python backend class is served as a shared transactional durable coordinator"
        return None

    def _open(self):
        from backends.registry import open_backend

        return open_backend(self.spec(), FixedClock(0), Hooks())

    def prepare(self, case) -> None:
        b = case.initial["backend"]
        self.config = {"namespaces": list(b["ledger_binding"]["namespaces"]), "write_paths": dict(b["write_paths"]),
                       "name": b["name"]}
        backend = self._open()
        try:
            backend.store.seed(case.initial["durable"])
            caps = backend.call("capabilities", {}).envelope
            self.profile.backend_name = ((caps.get("result") or {}).get("backend") or {}).get("name", "")
        finally:
            backend.close()
        if case.initial["faults"].get("publication-outcome-unknown") or any(
                a.get("target") == "publication-outcome-unknown" for a in case.actions):
            from chaos.faults.failsync import FsyncFault

            self.fsync = FsyncFault(str(self.dir / "failsync.ctl"), match=self.path)

    def spec(self) -> dict:
        return {"backend": "python", "factory": self.factory, "path": self.path, "clock_file": self.clock_file,
                **self.config}

    def host_env(self) -> dict:
        return self.fsync.env() if self.fsync is not None else {}

    def arm_commit_fault(self) -> None:
        self.fsync.arm()

    def disarm_commit_fault(self) -> None:
        self.fsync.disarm()

    def arm_sticky_fault(self, name: str) -> None:
        raise RuntimeError(f"{self.factory}: no store-level mechanism for {name}")

    def export_storage(self) -> dict:
        backend = self._open()
        try:
            return backend.store.export_durable()
        finally:
            backend.close()

    def teardown_storage(self) -> None:
        if self.fsync is not None:
            self.fsync.cleanup()


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


def probe(factory: str) -> str:
    """``"sqlite"`` when the factory's backend stores in ``SqliteStore``, else
    ``"store"`` (cached per factory; opened once on a scratch path)."""
    if factory in _probed:
        return _probed[factory]
    from backends.registry import open_backend
    from backends.sqlite.store import SqliteStore

    d = tempfile.mkdtemp(prefix="chaos-probe-")
    kind = "store"
    try:
        backend = open_backend({"backend": "python", "factory": factory, "path": os.path.join(d, "state"),
                                "namespaces": ["wbns_" + "0" * 32]}, FixedClock(0), Hooks())
        try:
            kind = "sqlite" if isinstance(getattr(backend, "store", None), SqliteStore) else "store"
        finally:
            backend.close()
    except Exception:
        kind = "store"   # it cannot even open on a scratch path: the cases will say so at set-up
    finally:
        shutil.rmtree(d, ignore_errors=True)
    _probed[factory] = kind
    return kind


def open_session(options: dict) -> SimpleSession:
    """Checks the factory once, before any case runs (a bad one is a usage error)."""
    check_factory(options.get("factory"))
    return SimpleSession(make_adapter, options)


def make_adapter(options: dict | None = None):
    options = dict(options or {})
    factory = check_factory(options.get("factory"))
    cls = PythonSqliteAdapter if probe(factory) == "sqlite" else PythonStoreAdapter
    return cls(factory, options)
