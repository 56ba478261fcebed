"""Docker nodes (``chaos run --nodes docker``): the PostgreSQL server and every
worker host in containers of a Docker daemon, faults through the Docker API.

* The daemon: ``DOCKER_HOST`` (or ``--docker-host``), else the local socket,
  through the ``docker`` SDK (``docker.DockerClient``).
* The image: ``chaos.nodes.image`` imports one built from this machine's files.
* The server: ``DockerPgServer``, the same surface as ``chaos.faults.pgserver.PgServer``.
  Its data directory and unix socket live in a host directory bind-mounted at
  ``/srv`` (``--network none``: nothing listens on any network); the harness
  seeds and exports through ``<dir>/s``, the workers through ``/srv/s``.
  ``kill`` is ``container.kill()`` (SIGKILL) then ``container.start()`` (crash
  recovery), ``pause`` is ``container.pause()`` (the daemon's cgroup freezer),
  ``restart`` is ``container.restart()`` (its stop signal is SIGINT, PostgreSQL's
  fast shutdown: sessions are cut, a clean checkpoint, then start).
* The workers: each host process is a container (``python3.11 -m chaos.host``)
  whose stdin/stdout are the daemon's attach stream, relayed by a local
  ``python -m chaos.nodes.relay`` process (``HostClient(launcher=...)``), so
  a worker talks the same JSON lines as a local one. Resource limits
  (``--node-memory``, ``--node-cpus``) go on every container.

Every container carries the label ``claim-chaos.run=<token>``; ``close()``
removes every container of the run, whatever state it is in.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import time

from chaos.nodes.image import POSTGRES_GID, POSTGRES_UID, PYTHON, SITE, SRC

LABEL = "claim-chaos.run"


def client(base_url: str | None = None):
    import docker

    if base_url:
        return docker.DockerClient(base_url=base_url)
    return docker.from_env()


def reachable(base_url: str | None = None) -> tuple[bool, str]:
    """(a daemon answers, its version or why not)."""
    try:
        c = client(base_url)
        return True, f"Docker {c.version().get('Version')} at {c.api.base_url}"
    except Exception as e:
        return False, f"no Docker daemon reachable ({type(e).__name__}: {str(e)[:160]})"


class Nodes:
    """The containers of one run: image, labels, limits, cleanup."""

    def __init__(self, base_url: str | None = None, memory: str | None = None, cpus: float | None = None,
                 log=lambda msg: print(msg, file=sys.stderr)):
        from chaos.nodes.image import ensure_image

        self.base_url = base_url
        self.client = client(base_url)
        self.image = ensure_image(self.client, log)
        self.token = secrets.token_hex(4)
        self.limits = {}
        if memory:
            self.limits["mem_limit"] = memory
        if cpus:
            self.limits["nano_cpus"] = int(float(cpus) * 1e9)
        self.mounts: dict = {}

    def labels(self, role: str) -> dict:
        return {LABEL: self.token, "claim-chaos.role": role}

    def containers(self) -> list:
        return self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.token}"})

    def close(self) -> None:
        for c in self.containers():
            try:
                c.remove(force=True)
            except Exception:
                pass


class DockerPgServer:
    """PostgreSQL in a container; the surface ``PostgresTarget`` and the server nemeses use."""

    SOCKET_DIR = "/srv/s"

    def __init__(self, nodes: Nodes, max_connections: int = 100):
        self.nodes = nodes
        self.dir = tempfile.mkdtemp(prefix="ccdk", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.port = 5432
        self.extra_env: dict = {}
        self._freezer = None
        self.container = None
        os.makedirs(os.path.join(self.dir, "s"))
        os.makedirs(self.data)
        open(self.log_path, "w").close()
        for p in (self.dir, self.data, os.path.join(self.dir, "s"), self.log_path):
            os.chown(p, POSTGRES_UID, POSTGRES_GID)
        os.chmod(self.data, 0o700)
        self._run_once(["/usr/lib/postgresql/15/bin/initdb", "-D", "/srv/data", "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--locale=C"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"listen_addresses = ''\nport = 5432\nunix_socket_directories = '{self.SOCKET_DIR}'\n"
                    f"fsync = on\nsynchronous_commit = on\nmax_connections = {max_connections}\n")

    def _volumes(self) -> dict:
        return {self.dir: {"bind": "/srv", "mode": "rw"}}

    def _run_once(self, cmd: list[str]) -> None:
        out = self.nodes.client.containers.run(self.nodes.image, cmd, user=f"{POSTGRES_UID}:{POSTGRES_GID}",
                                               volumes=self._volumes(), network_mode="none", remove=True,
                                               labels=self.nodes.labels("initdb"), environment={"HOME": "/srv"})
        return out

    # ------------------------------------------------------------------ PgServer surface

    def dsn(self, dbname: str = "postgres", tcp: bool = False, inside: bool = False) -> str:
        host = self.SOCKET_DIR if inside else os.path.join(self.dir, "s")
        return f"host={host} port={self.port} user=postgres dbname={dbname}"

    def _state(self) -> dict:
        if self.container is None:
            return {}
        try:
            self.container.reload()
        except Exception:
            return {}
        return self.container.attrs.get("State") or {}

    @property
    def pid(self) -> int | None:
        return self._state().get("Pid") or None

    def running(self) -> bool:
        st = self._state()
        return bool(st.get("Running")) and not st.get("Paused")

    def start(self, timeout: float = 60.0) -> None:
        if self.container is None:
            self.container = self.nodes.client.containers.run(
                self.nodes.image, ["/bin/sh", "-c", "exec /usr/lib/postgresql/15/bin/postgres -D /srv/data "
                                                     ">> /srv/postgres.log 2>&1"],
                user=f"{POSTGRES_UID}:{POSTGRES_GID}", volumes=self._volumes(), network_mode="none", detach=True,
                name=f"chaos-pg-{self.nodes.token}", labels=self.nodes.labels("server"),
                # docker stop/restart send this: PostgreSQL's fast shutdown (SIGTERM is its "smart" one,
                # which waits for every client session to end: the workers hold theirs open)
                stop_signal="SIGINT",
                environment={"HOME": "/srv"}, **self.nodes.limits)
        else:
            self.container.start()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._state().get("Status") == "exited":
                raise RuntimeError(f"the PostgreSQL container exited: {self.log_tail()}")
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2):
                    return
            except psycopg.Error:
                time.sleep(0.05)
        raise RuntimeError(f"the PostgreSQL container did not accept connections in {timeout:g} s")

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> list[int]:
        """SIGKILL through the Docker API; the host PIDs the container had."""
        pid = self.pid
        self.container.kill()
        deadline = time.monotonic() + 10
        while self._state().get("Running") and time.monotonic() < deadline:
            time.sleep(0.02)
        return [pid] if pid else []

    def pause(self) -> list[int]:
        pid = self.pid
        self.container.pause()
        return [pid] if pid else []

    def paused(self) -> bool:
        return bool(self._state().get("Paused"))

    def resume(self) -> None:
        if self.paused():
            self.container.unpause()

    def restart(self, timeout: float = 60.0) -> None:
        """A clean restart through the Docker API (SIGTERM, wait, start)."""
        self.container.restart(timeout=10)
        self._wait_ready(timeout)

    def preload_loaded(self, libname: str) -> bool:
        return False

    def cleanup(self) -> None:
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def launcher(nodes: Nodes, server: DockerPgServer | None, name: str) -> list[str]:
    """The argv prefix that makes a ``HostClient`` start its host in a container."""
    import json

    config = {"base_url": nodes.base_url, "image": nodes.image, "name": name, "labels": nodes.labels("worker"),
              "limits": nodes.limits, "volumes": server._volumes() if server else {},
              "python": PYTHON, "pythonpath": f"{SRC}:{SITE}"}
    return [sys.executable, "-m", "chaos.nodes.relay", json.dumps(config), "--"]
