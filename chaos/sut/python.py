"""An outside backend written as a Python class (the registry's ``python``
entry, ``--factory MOD:FN``), served inside the worker hosts like sqlite."""

from __future__ import annotations

from chaos.errors import SetupFailed
from chaos.sut.abilities import can, cannot
from chaos.sut.base import Sut, Target
from chaos.sut.sqlite import SqliteSut

#: what a factory's return value must have to be driven (``backends.api.Backend``, plus the Store for seeding)
BACKEND_METHODS = ("call", "close")


def open_factory(spec: dict, clock=None, hooks=None, store: bool = False):
    """The backend ``spec["factory"]`` opens; ``SetupFailed`` naming the factory
    (one line, exit 254) when the user's code raises or returns something that is
    not a backend: user code that fails is the user's error, not the suite's."""
    from backends.registry import UnknownBackend, open_backend

    factory = spec.get("factory")
    try:
        backend = open_backend(spec, clock, hooks)
    except UnknownBackend:
        raise
    except Exception as e:
        raise SetupFailed(f"--factory {factory}: raised {type(e).__name__}: {e}") from None
    needs = BACKEND_METHODS + (("store",) if store else ())
    missing = [m for m in needs if not (callable(getattr(backend, m, None)) if m != "store" else hasattr(backend, m))]
    if missing:
        raise SetupFailed(f"--factory {factory}: returned {type(backend).__name__}, not a backend "
                          f"(no {', '.join(missing)}; the registry signature is open_backend(spec, clock, hooks))")
    return backend

class PythonTarget(Target):
    """An outside backend written as a Python class (the registry's ``python``
    entry, ``--factory MOD:FN``). Its factory receives the run's SQLite file
    path like the sqlite backend does, so a backend built over ``SqliteStore``
    (the planted bugs, the mutants) needs no other setup; workers import the
    factory by module path."""

    name = "python"

    def setup(self, namespaces, durable: dict) -> None:
        self.spec = {"backend": "python", "factory": self.cfg.factory, "path": self.run.file("claims.db"),
                     "namespaces": list(namespaces)}
        backend = open_factory(self.spec, store=True)
        try:
            try:
                backend.store.seed(durable)
                self.capabilities = backend.call("capabilities", {}).envelope
            except Exception as e:
                raise SetupFailed(f"--factory {self.cfg.factory}: its backend failed the set-up "
                                  f"({type(e).__name__}: {e})") from None
        finally:
            backend.close()


class PythonSut(Sut):
    name = "python"
    order = 50
    summary = "an outside backend class: --factory MODULE:FUNCTION (registry signature)"
    takes = ("factory",)
    requires = ("factory",)
    cli = True       # ``chaos backend python --factory MOD:FN``: the class behind the contract CLI (black box)

    def usage_hint(self, key: str) -> str:
        return '"module:function" (e.g. "backends.sqlite:open_backend")'

    def check(self, opts: dict) -> None:
        super().check(opts)
        from chaos.conform.adapters.python import check_factory

        check_factory(opts["factory"])  # loadable here, before any run directory is made

    protocols = ("work-claim", "issue-lock")

    def issue_lock_target(self, cfg, run, note_pid=None, note_dir=None):
        from chaos.issuelock.targets import PythonLockTarget

        return PythonLockTarget(cfg, run, note_pid, note_dir)

    def declare(self, opts: dict) -> dict:
        if opts.get("protocol") == "issue-lock":
            from chaos.issuelock.targets import lock_abilities

            return lock_abilities(self.name, opts)
        rows = SqliteSut().declare(opts)
        rows["seed"] = can("the factory's store.seed (Store protocol) before the host serves", "store")
        rows["export"] = can("the factory's store.export_durable, by a fresh open after the host stopped", "store")
        factory = opts.get("factory")
        if factory:
            from chaos.conform.adapters.python import probe

            if probe(factory) != "sqlite":  # not over SqliteStore: none of the SQLite file's mechanisms
                rows["floor-fault"] = cannot(f"{factory}: its store offers no floor-failure trigger")
                rows["advisory-setup"] = cannot(f"{factory}: its store offers no real bypass writer")
                rows["outcome-unknown-fault"] = can(f"{factory}: the fsync EIO shim on its storage path at the commit",
                                                    "fsync")
                rows["write-paths"] = can("the spec's write_paths (the factory's own configuration)")
                from chaos.deterministic import FILE_FACTORIES, MEMORY_FACTORIES

                rows["deterministic"] = (
                    can(f"{factory}: its state files beside the run's path are the points (a known file store)",
                        "sched-shim") if factory in FILE_FACTORIES
                    else can(f"{factory}: its SQLite file's calls are the points; the rest of its state is the "
                             "serving process's memory, which runs under the scheduler", "sched-shim")
                    if factory in MEMORY_FACTORIES
                    else cannot(f"{factory}: not over SqliteStore; that its state lives only in files under the "
                                "run dir, in the worker's one thread, is not known"))
        return rows

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return PythonTarget(cfg, run, note_pid, note_dir)

    def cli_spec(self, ledger: str, args) -> dict:
        import os

        from chaos.errors import UsageError

        if not getattr(args, "factory", None):
            raise UsageError('chaos backend python needs --factory "module:function"')
        return {"backend": "python", "factory": args.factory, "path": os.path.join(ledger, "claims.db")}

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        from backends.sqlite import admin

        admin.provision(self.cli_spec(ledger, args)["path"], namespaces, write_paths=write_paths)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.python import open_session

        return open_session(options)


SUT = PythonSut()
