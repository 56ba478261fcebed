"""Our own throw-away PostgreSQL server (fault-tooling notes §1, §4).

``pg_ctl``, pytest-postgresql and testing.postgresql refuse to run as root, and
we need to be the postmaster's parent anyway (to ``wait()`` it, to SIGKILL its
whole tree, to freeze it). So ``PgServer`` runs ``initdb`` in a fresh
``/tmp`` directory and starts ``postgres`` directly, as the unprivileged
``postgres`` OS user when we are root.

Usage::

    with PgServer() as pg:                  # initdb + start; cleanup on exit
        conn = psycopg.connect(pg.dsn())
        pg.kill(); pg.start()               # crash + crash recovery
        pg.pause(); pg.resume()             # freezer as root, else SIGSTOP snapshot
        pg.extra_env = fault.env(); pg.restart()   # restart under LD_PRELOAD faults

The server always has ``fsync=on`` and ``synchronous_commit=on`` (durability
tests are meaningless otherwise). ``cleanup()`` leaves no process and no
directory behind, and returns only once every process of the server is gone;
it is idempotent and registered with ``atexit``. A guard process
(``chaos.watchdog``, on a pipe) does the same if the owner dies without
cleaning up, even by SIGKILL: an interrupted test run or ``chaos conform``
leaves no server and no ``ccpg*`` directory.

The directory is made in ``$CLAIM_CHAOS_PG_TMPDIR`` (default ``/tmp``; it
must be traversable by the server user), so a test can look only at the
servers it started.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from functools import wraps
from pathlib import Path

import psutil
import psycopg

from chaos.faults import procs


def _serialized(method):
    """One change of the server at a time. A nemesis step that outlives its
    bound is abandoned but keeps running (``chaos.driver.NemesisExecutor``):
    an abandoned fsync heal still starting a postmaster while the next step's
    kill started another left two postmasters on one data directory, the
    untracked one holding the shared memory, and every later start failed
    "pre-existing shared memory block is still in use" (default soak, postgres
    seed 6). The next step now waits for the abandoned one instead."""

    @wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


BINDIR_CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/14/bin")


def find_bindir() -> str | None:
    """The directory holding ``postgres`` and ``initdb``, or None."""
    env = os.environ.get("CLAIM_CHAOS_PG_BINDIR")
    for d in ([env] if env else []) + list(BINDIR_CANDIDATES):
        if d and os.path.exists(os.path.join(d, "postgres")) and os.path.exists(os.path.join(d, "initdb")):
            return d
    found = shutil.which("postgres")
    return os.path.dirname(found) if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServerError(RuntimeError):
    pass


class PgServer:
    """One initdb'd cluster in ``/tmp/ccpg*`` with its postmaster.

    ``run_as``: OS user for initdb and the server. Default: ``"postgres"``
    when we are root (postgres refuses to run as root), else ourselves.
    ``extra_env``: added to the server's environment at each ``start()``
    (e.g. ``LD_PRELOAD`` of a fault shim); may be changed between restarts.
    """

    def __init__(self, extra_env: dict | None = None, port: int | None = None, *,
                 run_as: str | None = None, bindir: str | None = None,
                 shared_buffers: str = "16MB", max_connections: int = 100,
                 start: bool = True):
        self.bindir = bindir or find_bindir()
        if not self.bindir:
            raise PgServerError("no PostgreSQL server binaries found (set CLAIM_CHAOS_PG_BINDIR)")
        self.extra_env = dict(extra_env or {})
        self.port = port or free_port()
        self._fixed_port = port is not None
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen | None = None
        self._lock = threading.RLock()
        self._freezer: procs.Freezer | None = None
        self._paused_pids: list[int] = []
        self._cleaned = False
        if run_as is None and os.geteuid() == 0:
            run_as = "postgres"
        self._ids: dict = {}
        self._home = os.environ.get("HOME", "/tmp")
        self.dir = tempfile.mkdtemp(prefix="ccpg", dir=os.environ.get("CLAIM_CHAOS_PG_TMPDIR") or "/tmp")
        atexit.register(self.cleanup)
        self._guard: subprocess.Popen | None = None
        try:
            self._guard = _start_guard(self.dir)
            self.sockdir = os.path.join(self.dir, "s")  # unix socket paths are limited to 107 bytes
            self.data = os.path.join(self.dir, "data")
            self.log_path = os.path.join(self.dir, "server.log")
            os.mkdir(self.sockdir)
            if run_as is not None and pwd.getpwnam(run_as).pw_uid != os.geteuid():
                pw = pwd.getpwnam(run_as)
                self._ids = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
                self._home = pw.pw_dir
                for d in (self.dir, self.sockdir):
                    os.chown(d, pw.pw_uid, pw.pw_gid)
            os.chmod(self.dir, 0o755)  # must be traversable by the server user
            self.run_as = run_as
            self._initdb(shared_buffers, max_connections)
            if start:
                self.start()
        except BaseException:
            self.cleanup()
            raise

    # ------------------------------------------------------------------ setup

    def _env(self, with_faults: bool) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_PRELOAD", "FAKETIME", "FAILSYNC", "PG"))}
        env.update({"HOME": self._home, "LC_ALL": "C", "TZ": "UTC"})
        if self.run_as:
            env["USER"] = env["LOGNAME"] = self.run_as
        if with_faults:
            env.update(self.extra_env)
        return env

    def _initdb(self, shared_buffers: str, max_connections: int) -> None:
        cmd = [os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres",
               "--auth=trust", "-E", "UTF8", "--locale=C"]
        res = subprocess.run(cmd, env=self._env(False), capture_output=True, text=True, **self._ids)
        if res.returncode != 0:
            raise PgServerError(f"initdb failed (rc={res.returncode}): {res.stderr.strip()[-500:]}")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(
                "\n# claim-chaos\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.sockdir}'\n"
                "fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n"
                f"shared_buffers = '{shared_buffers}'\nmax_connections = {max_connections}\n"
                "logging_collector = off\nlog_min_messages = warning\n"
                # DSM segments as files in the data dir, not /dev/shm: a killed server's go with the dir
                "dynamic_shared_memory_type = mmap\n"
            )

    # ------------------------------------------------------------------ lifecycle

    def dsn(self, dbname: str = "postgres", tcp: bool = True) -> str:
        """A libpq DSN: over TCP 127.0.0.1 (default; what a proxy can sit in
        front of) or over the unix socket directory."""
        host = self.host if tcp else self.sockdir
        return f"host={host} port={self.port} user=postgres dbname={dbname}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @_serialized
    def start(self, timeout: float = 60.0) -> None:
        """Start the postmaster (crash recovery runs if it was killed) and
        wait until it accepts connections. Retries on a taken port."""
        if self.running():
            return
        for attempt in range(5):
            if self._spawn_and_wait(timeout):
                return
            tail = self.log_tail()
            if "pre-existing shared memory block" in tail and self._kill_strays():
                continue   # a process of an earlier server held the shared memory: it is gone now
            if self._fixed_port or "already in use" not in tail:
                break
            self.port = free_port()
        raise PgServerError(f"postgres did not start: {self.log_tail()}")

    def _spawn_and_wait(self, timeout: float) -> bool:
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self._log_offset = offset
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [os.path.join(self.bindir, "postgres"), "-D", self.data, "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self._env(True), start_new_session=True, **self._ids)
        finally:
            log.close()
        procs.register(self.proc.pid)
        self._guard_note(self.proc.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                procs.unregister(self.proc.pid)
                return False
            try:
                with psycopg.connect(self.dsn(tcp=False), connect_timeout=2, autocommit=True) as c:
                    c.execute("SELECT 1")
                return True
            except psycopg.OperationalError:
                time.sleep(0.02)
        self.kill()
        return False

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(getattr(self, "_log_offset", 0))
                return f.read().decode(errors="replace")[-n:]
        except FileNotFoundError:
            return ""

    @_serialized
    def kill(self) -> list[int]:
        """Crash: SIGKILL the postmaster and every child (snapshot now), reap all.
        Works on a paused (stopped or frozen) server too."""
        if self.proc is None:
            return []
        pids: list[int] = []
        if self._freezer is not None:
            pids = self._freezer.pids()
            procs.signal_pids(pids, signal.SIGKILL)
            self._freezer.thaw()  # frozen tasks die only once thawed
        killed = procs.ProcessTree(self.proc.pid, popen=self.proc).kill()
        procs.reap(pids)
        strays = self._kill_strays()
        self._drop_pause_state()
        procs.unregister(self.proc.pid)
        return sorted(set(pids) | set(killed) | set(strays))

    def _kill_strays(self) -> list[int]:
        """SIGKILL and reap every process still working in this server's data
        directory (a server process's cwd) that no snapshot covered: a backend
        forked between a pause's snapshot and its freeze runs on, and once its
        postmaster is killed it may wait forever on a lock a killed process
        held, attached to the shared memory, so that every later start fails
        with "pre-existing shared memory block is still in use" (postgres
        soak seed 9). The data directory is ours (a temp dir), so is whatever
        works in it."""
        data = os.path.realpath(self.data)
        found = []
        for p in psutil.process_iter():
            try:
                if p.pid != os.getpid() and p.cwd() == data:
                    found.append(p.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if found:
            procs.signal_pids(found, signal.SIGKILL)
            procs.reap(found)
        return found

    @_serialized
    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT); SIGKILL if it does not finish in time."""
        if not self.running():
            self._drop_pause_state()
            return
        self.resume()
        children = [pid for pid in self.tree_pids() if pid != self.proc.pid]
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        procs.reap(children)  # a child the postmaster no longer waits for is still ours to outlive
        procs.unregister(self.proc.pid)

    @_serialized
    def restart(self, crash: bool = True) -> None:
        """Kill (crash=True, recovery on start) or stop cleanly, then start."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()

    # ------------------------------------------------------------------ pause

    @_serialized
    def pause(self) -> list[int]:
        """Freeze the server. As root: the cgroup v1 freezer (covers backends
        forked once the postmaster is in it). Otherwise: SIGSTOP the tree.
        Either way the tree is looked at again until nothing new is in it: a
        backend the postmaster forked between the look and its freeze would
        run on through the pause. A backend that exited just before is a
        zombie in the tree and in no freezer group: it runs nothing."""
        if not self.running():
            raise PgServerError("server is not running")
        tree = procs.ProcessTree(self.proc.pid)
        if procs.freezer_available():
            self._freezer = self._freezer or procs.Freezer(f"claimchaos-pg-{self.proc.pid}")
            tried: set[int] = set()   # not the group's members: a zombie never joins it
            while new := set(tree.pids()) - tried:
                self._freezer.add(sorted(new))
                self._freezer.freeze()
                tried |= new
            return self._freezer.pids()
        self._paused_pids = tree.pause()
        return self._paused_pids

    @_serialized
    def resume(self) -> None:
        if self._freezer is not None:
            self._freezer.thaw()
        if self._paused_pids:
            procs.signal_pids(self._paused_pids, signal.SIGCONT)
        self._drop_pause_state()

    def _drop_pause_state(self) -> None:
        if self._freezer is not None:
            try:
                self._freezer.remove()
            except OSError:
                pass
            self._freezer = None
        self._paused_pids = []

    # ------------------------------------------------------------------ checks

    def preload_loaded(self, libname: str) -> bool:
        """True when ``libname`` is mapped into the running postmaster
        (an unreadable LD_PRELOAD library is skipped silently by ld.so)."""
        if not self.running():
            return False
        try:
            return libname in Path(f"/proc/{self.proc.pid}/maps").read_text()
        except OSError:
            return False

    def tree_pids(self) -> list[int]:
        return procs.ProcessTree(self.proc.pid).pids() if self.running() else []

    # ------------------------------------------------------------------ teardown

    @_serialized
    def cleanup(self) -> None:
        """Stop the server (SIGKILL if needed), remove the directory. Idempotent."""
        if self._cleaned:
            return
        self._cleaned = True
        try:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.stop(timeout=10)
                finally:
                    if self.proc.poll() is None:
                        self.kill()
            self._drop_pause_state()
        finally:
            _remove_sysv_segment(self.data)
            shutil.rmtree(self.dir, ignore_errors=True)
            self._stop_guard()
            try:
                atexit.unregister(self.cleanup)
            except Exception:
                pass

    # ------------------------------------------------------------------ the guard

    def _guard_note(self, pid: int) -> None:
        from chaos.watchdog import start_time

        with open(os.path.join(self.dir, _GUARD_PIDS), "a") as f:
            f.write(f"{pid} {start_time(pid)}\n")

    def _stop_guard(self) -> None:
        """Our own cleanup is done: release the guard (it finds nothing left to do)."""
        guard, self._guard = self._guard, None
        if guard is None:
            return
        try:
            guard.stdin.close()
            guard.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            procs.ProcessTree(guard.pid, popen=guard).kill()
        procs.unregister(guard.pid)

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()


_GUARD_PIDS = "guard.pids"


def _start_guard(directory: str) -> subprocess.Popen:
    """``python -m chaos.watchdog DIR/guard.pids DIR`` on a pipe, in its own
    session (a Ctrl-C of the owner's terminal must not end it first)."""
    open(os.path.join(directory, _GUARD_PIDS), "w").close()
    guard = subprocess.Popen([sys.executable, "-m", "chaos.watchdog", os.path.join(directory, _GUARD_PIDS), directory],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    procs.register(guard.pid)
    return guard


def _remove_sysv_segment(data: str) -> None:
    """Remove the small System V segment a killed postmaster leaves behind (a
    clean shutdown removes it itself; the next start would, but there is
    none). Its id is on line 7 of ``postmaster.pid``; it goes only if nothing
    is attached to it any more."""
    try:
        with open(os.path.join(data, "postmaster.pid")) as f:
            fields = f.read().splitlines()[6].split()
        shmid = int(fields[1])
    except (OSError, IndexError, ValueError):
        return
    try:   # columns: key shmid perms size cpid lpid nattch ...
        with open("/proc/sysvipc/shm") as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    except OSError:
        return
    if not any(len(r) > 6 and r[1] == str(shmid) and r[6] == "0" for r in rows):
        return   # gone already, or still attached: not ours to take
    import ctypes

    ipc_rmid = 0
    ctypes.CDLL(None, use_errno=True).shmctl(shmid, ipc_rmid, None)


def server_alive_pids(pids: list[int]) -> list[int]:
    """The PIDs of ``pids`` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive
