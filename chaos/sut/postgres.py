"""PostgreSQL (``backends.postgres``): our own server (initdb in /tmp, started
as ``postgres`` when root, the fsync shim preloaded when the fsync nemesis is
requested), or the user's ``--dsn`` (then only a fresh schema is created, and
only it is dropped at the end; a server we did not start is never killed,
paused or fsync-faulted). With the ``lost-reply`` nemesis, workers connect
through a ``FaultProxy``. Server faults (kill, pause, fsync) target the server;
the clock is the worker's (the service's clock is authoritative)."""

from __future__ import annotations

import os
import shutil
import sys

from chaos.errors import SetupFailed, UsageError
from chaos.sut.abilities import can, cannot
from chaos.sut.base import Sut, Target, open_spec

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
        self.nodes = None          # chaos.nodes.docker.Nodes with --nodes docker
        self._closed = False

    def setup(self, namespaces, durable: dict) -> None:
        from backends.postgres import open_backend as open_pg
        from backends.api import Hooks, SystemClock

        nemeses = set(self.cfg.nemesis)
        if self.cfg.dsn:
            self.admin_dsn = self.cfg.dsn
        elif getattr(self.cfg, "nodes", "local") == "docker":
            self._docker_server()
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
        worker_dsn = self.server.dsn(inside=True) if self.nodes is not None else self.admin_dsn
        if "lost-reply" in nemeses:
            host, port = self._tcp_target()
            self.proxy = counting_proxy(host, port)
            from psycopg.conninfo import make_conninfo

            worker_dsn = make_conninfo(self.admin_dsn, host="127.0.0.1", port=str(self.proxy.port))
        spec = {"backend": "postgres", "dsn": self.admin_dsn, "namespaces": list(namespaces)}
        if self.cfg.dsn:  # the user's database: name the schema to the watchdog before creating it
            from backends.postgres.schema import random_schema_name
            from chaos.watchdog import note_schema

            spec["schema"] = random_schema_name()
            note_schema(self.run.tmp, spec["schema"])
        backend = open_pg(spec, SystemClock(), Hooks())
        try:
            self.schema = backend.store.schema
            backend.store.seed(durable)
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()
        self.spec = {"backend": "postgres", "dsn": worker_dsn, "schema": self.schema,
                     "namespaces": list(namespaces), "deadline_s": 3.0, "provisioned": True}
        if self.cfg.factory:   # an outside class over PostgresStore (a variant of the suite's own)
            self.spec.update(backend="python", factory=self.cfg.factory)

    def _docker_server(self) -> None:
        """The server in a container of the run's Docker daemon (``chaos.nodes.docker``)."""
        from chaos.nodes.docker import DockerPgServer, Nodes

        try:
            self.nodes = Nodes(self.cfg.docker_host, memory=self.cfg.node_memory, cpus=self.cfg.node_cpus)
            self.server = DockerPgServer(self.nodes, max_connections=max(100, 4 * self.cfg.workers + 20))
        except Exception as e:
            raise SetupFailed(f"--nodes docker: {type(e).__name__}: {e}") from None
        self.owned_server = True
        self.note_dir(self.server.dir)
        self.start_server()
        self.admin_dsn = self.server.dsn()

    def worker_launcher(self, t: int):
        """Slot ``t``'s host launcher: generation -> the relay argv (a new container each time)."""
        from chaos.nodes.docker import launcher

        return lambda generation: launcher(self.nodes, self.server, f"chaos-{self.nodes.token}-w{t}-{generation}")

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
        if self.nodes is not None:
            out.update(nodes="docker", docker=self.nodes.client.api.base_url, image=self.nodes.image)
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
                if self.nodes is not None:
                    self.nodes.close()      # every container of the run, whatever its state
            elif self.schema and self.admin_dsn:
                self._drop_schema()
            if self.server_fsync is not None:
                self.server_fsync.cleanup()

    def _drop_schema(self) -> None:
        """The user's server: drop only the schema this run created."""
        from backends.postgres.admin import drop_created_schema
        from chaos.watchdog import forget_schema

        try:
            drop_created_schema(self.admin_dsn, self.schema)
            forget_schema(self.run.tmp, self.schema)
        except Exception as e:  # the watchdog tries again when the run ends
            print(f"chaos: could not drop schema {self.schema}: {type(e).__name__}: {e}", file=sys.stderr)


def _export_with(spec: dict) -> dict:
    backend = open_spec(spec)
    try:
        return backend.store.export_durable()
    finally:
        backend.close()


def _docker_abilities(opts: dict) -> dict:
    """``--nodes docker``: the server and the workers are containers; faults go through the Docker API."""
    no_net = "containers run on --network none and reach the server over a unix socket: no proxy between them"
    no_preload = "the worker containers do not carry this machine's preload libraries"
    return {
        "seed": can("PostgresStore.seed through the server container's unix socket (bind-mounted)", "store"),
        "export": can("a fresh PostgresStore reads the schema through the same socket", "store"),
        "barrier": can("the engine's before_commit hook in the worker host (in its container)", "hook"),
        "floor-fault": can("a trigger raising on the floor table", "trigger"),
        "restart": can("the server container: container.restart() through the Docker API (SIGINT: fast shutdown, start)",
                       "docker-api"),
        "kill": can("the server container: container.kill() (SIGKILL) and start through the Docker API, "
                    "crash recovery", "docker-api"),
        "pause": can("the server container: container.pause()/unpause() (the daemon's cgroup freezer)", "docker-api"),
        "clock": cannot(no_preload),
        "fsync": cannot(no_preload),
        "lost-reply": cannot(no_net),
        "partition": cannot(no_net),
        "power-loss": cannot("PostgreSQL's durability is its own WAL and fsync; the power-loss shim is for file stores"),
        "advisory-setup": can("the real bypass writer (admin.enable_bypass_writer)", "bypass"),
        "write-paths": can("provisioned with the case's inventory (a missing entry stays missing)"),
        "legacy-writes": can("the engine's legacy refusals"),
        "claim-verify": cannot("a strict fenced store has nothing to reconcile with git"),
        "commit": cannot("items live in the database, not in a git work tree"),
    }


def _no_own_server(opts: dict) -> str | None:
    """Why the server faults are unavailable, else None."""
    if opts.get("dsn"):
        return "needs a server started by chaos run (never faults a --dsn server)"
    from chaos.faults.pgserver import find_bindir

    if find_bindir() is None:
        return "no PostgreSQL binaries: only with --dsn, and then never on the server"
    return None


class PostgresSut(Sut):
    name = "postgres"
    order = 20
    summary = "strict fenced: one READ COMMITTED transaction per decision, namespace row lock"
    cli = True
    cli_ledger = False          # --dsn / --schema, not a directory
    takes = ("dsn", "factory", "nodes")   # factory: a class over PostgresStore, opened like the python backend

    def declare(self, opts: dict) -> dict:
        if opts.get("nodes") == "docker":
            return _docker_abilities(opts)
        no_server = _no_own_server(opts)
        server = (lambda how: cannot(no_server)) if no_server else (lambda how: can(how, "server"))
        return {
            "seed": can("PostgresStore.seed into a fresh schema before any worker serves", "store"),
            "export": can("a fresh PostgresStore reads the schema (directly, not through the proxy)", "store"),
            "barrier": can("the engine's before_commit hook in the worker host", "hook"),
            "clock-hook": can("the host's file clock (FileClock), set per action", "hook"),
            "floor-fault": can("a trigger raising on the floor table", "trigger"),
            "outcome-unknown-fault": can("the store cuts its own connection as COMMIT is sent", "commit-cut"),
            "restart": can("worker processes: drop state and connection, reopen", "workers"),
            "freeze-call": can("the worker host serving the call (holding its transaction): SIGSTOP mid-call", "host"),
            "kill-call": can("the worker host serving the call: SIGKILL mid-call (the server rolls back or "
                             "commits what it had)", "host"),
            "kill": server("the PostgreSQL server tree: SIGKILL, restart with crash recovery"),
            "pause": server("the PostgreSQL server: cgroup freezer (root) or SIGSTOP snapshot"),
            "clock": can("worker wall clocks (the service's clock is authoritative): libfaketime", "workers"),
            "fsync": server("the PostgreSQL server: EIO shim preloaded, PANIC, restart at the heal"),
            "lost-reply": can("fault proxy in front of the server: replies dropped for a window", "proxy"),
            "partition": can("one fault proxy per worker: some lose the server (blackhole or refused), the rest go on",
                             "worker-proxies"),
            "power-loss": cannot("the server's durability is PostgreSQL's own WAL and fsync (the fsync and kill "
                                 "nemeses fault it); the power-loss shim covers file-backed stores"),
            "advisory-setup": can("the real bypass writer (admin.enable_bypass_writer)", "bypass"),
            "write-paths": can("provisioned with the case's inventory (a missing entry stays missing)"),
            "legacy-writes": can("the engine's legacy refusals"),
            "claim-verify": cannot("a strict fenced store has nothing to reconcile with git"),
            "commit": cannot("items live in the database, not in a git work tree"),
        }

    def check(self, opts: dict) -> None:
        super().check(opts)
        if opts.get("dsn"):
            from psycopg import ProgrammingError
            from psycopg.conninfo import conninfo_to_dict

            try:
                conninfo_to_dict(opts["dsn"])
            except ProgrammingError as e:
                raise UsageError(f"--dsn: not a libpq connection string ({str(e).strip()})") from None
        if opts.get("factory"):
            from chaos.conform.adapters.python import check_factory

            check_factory(opts["factory"])  # loadable here, before any run directory is made
        if not opts.get("dsn"):
            from chaos.faults.pgserver import find_bindir

            if find_bindir() is None:
                raise UsageError("--backend postgres: no PostgreSQL server binaries found (set CLAIM_CHAOS_PG_BINDIR "
                                 "or give --dsn)")

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return PostgresTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.postgres import open_session

        return open_session(options)

    def cli_spec(self, ledger: str, args) -> dict:
        if not args.dsn:
            raise UsageError("chaos backend postgres: --dsn is required")
        return {"backend": "postgres", "dsn": args.dsn, **({"schema": args.schema} if args.schema else {})}

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        from backends.registry import open_backend
        from backends.api import Hooks, SystemClock

        spec = {**self.cli_spec(ledger, args), "namespaces": namespaces, **({"write_paths": write_paths} if write_paths else {})}
        open_backend(spec, SystemClock(), Hooks()).close()


SUT = PostgresSut()
