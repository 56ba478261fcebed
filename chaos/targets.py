"""The system under test of one ``chaos run``: provision, seed, serve, export, tear down.

One class per backend, all with the same small surface the runner uses::

    target = make_target(cfg, run, note_pid, note_dir)
    target.setup(namespaces, durable)   # provision + seed (privileged path)
    target.spec                          # what every worker host opens
    target.capabilities                  # the capabilities envelope (or None)
    target.export()                      # final durable state
    target.close()                       # idempotent; also runs on errors

``note_pid(pid)`` records a process for the run's watchdog (it kills it with
its descendants if ``chaos run`` itself dies, even by SIGKILL); ``note_dir``
records a directory outside the run dir to remove then (a server's /tmp dir).

* ``sqlite``: ``claims.db`` in the run dir.
* ``postgres``: our own ``PgServer`` (initdb in /tmp, started as ``postgres``
  when root, the fsync shim preloaded when the fsync nemesis is requested),
  or the user's ``--dsn`` (then only a fresh schema is created, and only it is
  dropped at the end; a server we did not start is never killed). With the
  ``lost-reply`` nemesis, workers connect through a ``FaultProxy``.
* ``gitjournal``: ``repo/`` (``git init``) with one provisioned ledger per
  namespace (a Git ledger binds one namespace), behind one endpoint group.
* ``external``: any contract CLI (``--command``) driven per its profile
  (``--profile``, default ``profiles/chaos-sqlite.yaml``): provisioned and
  seeded through its privileged ``admin`` commands, one CLI process per op.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Callable

from chaos.errors import SetupFailed, UsageError

BACKENDS = ("sqlite", "postgres", "gitjournal", "external", "python")


def _open(spec: dict):
    from backends.registry import open_backend

    return open_backend(spec)


def redact_dsn(dsn: str | None) -> str | None:
    """A DSN safe to record: any password is replaced by ``***`` (the run
    directory, the recorded command and results.json never hold a secret)."""
    if not dsn:
        return dsn
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable DSN>"
    if "password" not in parts:
        return dsn
    parts["password"] = "***"
    return make_conninfo("", **parts)


class Target:
    name = ""

    def __init__(self, cfg, run, note_pid: Callable[[int], None], note_dir: Callable[[str], None]):
        self.cfg = cfg
        self.run = run
        self.note_pid = note_pid
        self.note_dir = note_dir
        self.spec: dict = {}
        self.capabilities: dict | None = None
        self.server = None      # PgServer when we run one
        self.proxy = None       # FaultProxy in front of the server (lost-reply)
        self.server_fsync = None  # FsyncFault preloaded into the server

    def setup(self, namespaces, durable: dict) -> None:
        backend = _open(self.spec)
        try:
            backend.store.seed(durable)
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()

    def export(self) -> dict:
        backend = _open(self.spec)
        try:
            return backend.store.export_durable()
        finally:
            backend.close()

    def close(self) -> None:
        return None

    def describe(self) -> dict:
        """What ``results.json`` records about the system under test."""
        spec = {k: v for k, v in self.spec.items() if k != "namespaces"}
        if "dsn" in spec:
            spec["dsn"] = redact_dsn(spec["dsn"])
        return {"backend": self.name, "spec": spec}


class SqliteTarget(Target):
    name = "sqlite"

    def setup(self, namespaces, durable: dict) -> None:
        self.spec = {"backend": "sqlite", "path": self.run.file("claims.db"), "namespaces": list(namespaces)}
        super().setup(namespaces, durable)


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
        super().setup(namespaces, durable)


def counting_proxy(host: str, port: int):
    """A ``FaultProxy`` whose dropped reply chunks are counted in ``.dropped``
    (the proxy reads ``drop_responses`` once per server->client chunk, and only
    for that direction, so each true read is one discarded reply chunk)."""
    from chaos.faults.proxy import FaultProxy

    class CountingProxy(FaultProxy):
        dropped = 0
        _drop = False

        @property
        def drop_responses(self) -> bool:  # type: ignore[override]
            if self._drop:
                self.dropped += 1
            return self._drop

        @drop_responses.setter
        def drop_responses(self, value: bool) -> None:
            self._drop = bool(value)

    return CountingProxy(host, port)


class PostgresTarget(Target):
    name = "postgres"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.admin_dsn: str | None = None
        self.schema: str | None = None
        self.owned_server = False
        self.postmasters: list[int] = []
        self._closed = False

    def setup(self, namespaces, durable: dict) -> None:
        from backends.postgres import open_backend as open_pg
        from backends.api import Hooks, SystemClock

        nemeses = set(self.cfg.nemesis)
        if self.cfg.dsn:
            self.admin_dsn = self.cfg.dsn
        else:
            from chaos.faults.pgserver import PgServer, PgServerError

            try:
                self.server = PgServer(start=False, max_connections=max(100, 4 * self.cfg.workers + 20))
            except PgServerError as e:
                raise SetupFailed(str(e)) from None
            self.owned_server = True
            self.note_dir(self.server.dir)
            with open(os.path.join(self.server.data, "postgresql.conf"), "a") as f:
                # crash recovery fsyncs the data dir first: one syncfs instead of a
                # per-file fsync walk (seconds on a busy disk) keeps kill restarts short
                f.write("recovery_init_sync_method = syncfs\n")
            if "fsync" in nemeses:
                from chaos.faults.failsync import FsyncFault

                # the control file must be reachable by the unprivileged server user
                self.server_fsync = FsyncFault(os.path.join(self.server.dir, "failsync.ctl"))
                self.server.extra_env = self.server_fsync.env()
            self.start_server()
            self.admin_dsn = self.server.dsn()
        worker_dsn = self.admin_dsn
        if "lost-reply" in nemeses:
            host, port = self._tcp_target()
            self.proxy = counting_proxy(host, port)
            from psycopg.conninfo import make_conninfo

            worker_dsn = make_conninfo(self.admin_dsn, host="127.0.0.1", port=str(self.proxy.port))
        backend = open_pg({"backend": "postgres", "dsn": self.admin_dsn, "namespaces": list(namespaces)},
                          SystemClock(), Hooks())
        try:
            self.schema = backend.store.schema
            backend.store.seed(durable)
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()
        self.spec = {"backend": "postgres", "dsn": worker_dsn, "schema": self.schema,
                     "namespaces": list(namespaces), "deadline_s": 3.0}
        if self.cfg.factory:   # an outside class over PostgresStore (a variant of the suite's own)
            self.spec.update(backend="python", factory=self.cfg.factory)

    def _tcp_target(self) -> tuple[str, int]:
        if self.server is not None:
            return "127.0.0.1", self.server.port
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.admin_dsn)
        host = info.get("host") or ""
        if host not in ("127.0.0.1", "localhost"):
            raise UsageError("--nemesis lost-reply with --dsn needs a TCP DSN on 127.0.0.1 (the fault proxy sits "
                             f"in front of it), not host={host or '<unix socket>'!r}")
        return "127.0.0.1", int(info.get("port") or 5432)

    def start_server(self) -> int:
        """(Re)start our server (crash recovery runs after a kill) and record its PID."""
        self.server.start()
        self.note_pid(self.server.pid)
        self.postmasters.append(self.server.pid)
        return self.server.pid

    def describe(self) -> dict:
        out = super().describe()
        out.update(schema=self.schema, own_server=self.owned_server, through_proxy=self.proxy is not None)
        if self.server is not None:
            out.update(server_dir=self.server.dir, postmaster_pids=list(self.postmasters))
        return out

    def export(self) -> dict:
        return _export_with(dict(self.spec, dsn=self.admin_dsn))  # directly, not through the proxy

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.proxy is not None:
                self.proxy.close()
        finally:
            if self.server is not None:
                try:
                    if os.path.exists(self.server.log_path):
                        shutil.copyfile(self.server.log_path, self.run.file("logs", "postgres.log"))
                except OSError:
                    pass
                self.server.cleanup()   # stops (or kills) the server tree, removes its /tmp dir
            elif self.schema and self.admin_dsn:
                self._drop_schema()
            if self.server_fsync is not None:
                self.server_fsync.cleanup()

    def _drop_schema(self) -> None:
        """The user's server: drop only the schema this run created."""
        from backends.postgres.store import PostgresStore

        try:
            PostgresStore(self.admin_dsn, self.schema).drop_created()
        except Exception as e:
            print(f"chaos: could not drop schema {self.schema}: {type(e).__name__}: {e}", file=sys.stderr)


def _export_with(spec: dict) -> dict:
    backend = _open(spec)
    try:
        return backend.store.export_durable()
    finally:
        backend.close()


class GitJournalTarget(Target):
    name = "gitjournal"

    def setup(self, namespaces, durable: dict) -> None:
        from backends.gitjournal import provision
        from backends.gitjournal.store import GitJournalStore

        repo = self.run.file("repo")
        res = subprocess.run(["git", "init", "-q", repo], capture_output=True, text=True)
        if res.returncode != 0:
            raise SetupFailed(f"git init failed: {res.stderr.strip()}")
        ledgers = []
        for i, ns in enumerate(namespaces):
            ledger = provision(os.path.join(repo, f"ledger-{i + 1}"), ns)
            GitJournalStore(ledger).seed(durable)
            ledgers.append(ledger.path)
        self.spec = {"backend": "gitjournal", "ledgers": ledgers, "lock_wait_ms": 5000}
        backend = _open(self.spec)
        try:
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()


def resolve_command(command: str) -> str:
    """``chaos ...`` is this suite's CLI; a leading ``python``/``python3`` is this
    interpreter (the venv that has the suite's dependencies)."""
    import shlex

    from chaos.conform.adapters.external import resolve_command as conform_resolve

    words = shlex.split(command)
    if words[:1] in (["python"], ["python3"]):
        return shlex.join([sys.executable, *words[1:]])
    return conform_resolve(command)


class ExternalTarget(Target):
    name = "external"

    def setup(self, namespaces, durable: dict) -> None:
        from backends.contract import compact_json
        from backends.external import ExternalBackend, load_profile
        from chaos.conform.adapters.external import DEFAULT_PROFILE

        if not self.cfg.backend_command:
            raise UsageError("chaos run --backend external needs --command '...'")
        profile_path = os.path.abspath(self.cfg.profile or os.path.normpath(DEFAULT_PROFILE))
        try:
            profile = load_profile(profile_path)
        except ValueError as e:
            raise UsageError(str(e)) from None
        for need in ("seed", "export"):
            if need not in profile.admin:
                raise UsageError(f"profile {profile.name} has no privileged '{need}' command; chaos run needs it")
        command = resolve_command(self.cfg.backend_command)
        root = self.run.file("ledgers")
        os.makedirs(root, exist_ok=True)
        if profile.git:
            subprocess.run(["git", "init", "-q", root], check=True, capture_output=True)
        groups = [[ns] for ns in namespaces] if profile.one_namespace_per_ledger else [list(namespaces)]
        ledgers: dict[str, str] = {}
        for i, group in enumerate(groups):
            path = os.path.join(root, f"ledger-{i + 1}")
            os.makedirs(path, exist_ok=True)
            for ns in group:
                ledgers[ns] = path
        self.spec = {"backend": "external", "command": command, "profile": profile_path, "ledgers": ledgers}
        self.groups = groups
        self.backend = ExternalBackend(self.spec)
        raw = compact_json(durable)
        try:
            for group in groups:
                self.backend.provision(ledgers[group[0]], group)
                self.backend.admin("seed", ledgers[group[0]], raw, namespace=group[0])
            self.capabilities = self.backend.call("capabilities", {}).envelope
        except Exception as e:
            raise SetupFailed(f"external backend setup failed: {type(e).__name__}: {e}") from None

    def export(self) -> dict:
        from backends.gitjournal.projection import merge

        return merge([self.backend.admin("export", self.spec["ledgers"][g[0]], namespace=g[0]) for g in self.groups])


def make_target(cfg, run, note_pid, note_dir) -> Target:
    table = {"sqlite": SqliteTarget, "postgres": PostgresTarget, "gitjournal": GitJournalTarget,
             "external": ExternalTarget, "python": PythonTarget}
    if cfg.backend not in table:
        raise UsageError(f"backend {cfg.backend!r} is not supported by chaos run ({', '.join(BACKENDS)})")
    return table[cfg.backend](cfg, run, note_pid, note_dir)
