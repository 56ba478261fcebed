"""Kill a run's processes when the run itself dies, even by SIGKILL.

``chaos run`` starts ``python -m chaos.watchdog PIDFILE TMPDIR`` in its own
session with a pipe on stdin and keeps the write end. The watchdog blocks on
that pipe. End of file means the runner is gone (a normal exit closes it after
its own cleanup; a SIGKILL closes it through the kernel). It then SIGKILLs
every process listed in PIDFILE (``pid starttime`` lines, written by the
runner as it starts workers and servers) whose start time still matches, so a
recycled PID is never touched, and removes TMPDIR (preload control files).
SIGKILL also ends stopped (paused) workers, which a closed stdin would not.
Each listed PID is killed with its descendants (a PostgreSQL server tree, an
external CLI child), a frozen server's freezer cgroup is thawed and removed,
and the directories listed in the optional DIRSFILE (a server's data dir in
/tmp) are removed: ``python -m chaos.watchdog PIDFILE TMPDIR [DIRSFILE]``.

A ``--dsn`` run creates a schema in the user's database. It names the schema
in ``TMPDIR/schemas`` (``note_schema``, flushed to disk) BEFORE creating it,
and the watchdog gets the DSN in its environment (``$CHAOS_WATCHDOG_DSN``,
never on disk: it may hold a password). After the kills the watchdog drops
each listed schema that carries claim-chaos's marker -- only those, never a
schema it did not see named there. The run forgets a schema it dropped
itself (``forget_schema``), so a normal end costs no extra connection.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

DSN_ENV = "CHAOS_WATCHDOG_DSN"
SCHEMAS = "schemas"


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants now (a PostgreSQL backend or an external
    CLI child runs in its own session: a process-group kill misses it)."""
    try:
        import psutil

        return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:
        return [pid]


def _freezer(pid: int) -> str:
    """The freezer cgroup ``PgServer.pause`` makes for postmaster ``pid``."""
    return f"/sys/fs/cgroup/freezer/claimchaos-pg-{pid}"


def _thaw(path: str) -> None:
    """Frozen tasks die of SIGKILL only once thawed."""
    try:
        with open(os.path.join(path, "freezer.state"), "w") as f:
            f.write("THAWED")
    except OSError:
        pass


def kill_listed(pidfile: str) -> list[int]:
    killed = []
    try:
        lines = open(pidfile).read().split("\n")
    except OSError:
        return killed
    freezers = []
    for line in lines:
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if start_time(pid) != parts[1]:
            continue  # gone, or a recycled PID that is not ours
        if os.path.isdir(_freezer(pid)):
            freezers.append(_freezer(pid))
        for member in _tree(pid):
            try:
                os.kill(member, signal.SIGKILL)
                killed.append(member)
            except ProcessLookupError:
                pass
    for path in freezers:
        _thaw(path)
        for _ in range(200):  # the group empties once its killed members are gone
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)
    return killed


def remove_listed_dirs(dirsfile: str) -> None:
    """Remove the directories listed one per line (e.g. a server's /tmp/ccpg* dir)."""
    try:
        lines = open(dirsfile).read().split("\n")
    except OSError:
        return
    for line in lines:
        if line.strip():
            shutil.rmtree(line.strip(), ignore_errors=True)


def note_schema(tmpdir: str, name: str) -> None:
    """Record, durably, that this run is about to create schema ``name``."""
    with open(os.path.join(tmpdir, SCHEMAS), "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


def forget_schema(tmpdir: str, name: str) -> None:
    """The run dropped ``name`` itself: nothing left for the watchdog to do."""
    path = os.path.join(tmpdir, SCHEMAS)
    try:
        names = [n for n in open(path).read().split() if n != name]
    except OSError:
        return
    with open(path + ".tmp", "w") as f:
        f.write("".join(n + "\n" for n in names))
    os.replace(path + ".tmp", path)


def drop_listed_schemas(tmpdir: str, dsn: str | None) -> list[str]:
    """Drop every schema named in ``TMPDIR/schemas`` that claim-chaos created."""
    try:
        names = open(os.path.join(tmpdir, SCHEMAS)).read().split()
    except OSError:
        return []
    if not names or not dsn:
        return []
    from backends.postgres.admin import drop_created_schema

    dropped = []
    for name in dict.fromkeys(names):
        for attempt in range(3):  # a killed worker's session may hold a lock for a moment
            try:
                if drop_created_schema(dsn, name):
                    dropped.append(name)
                break
            except Exception as e:
                if attempt == 2:
                    print(f"chaos watchdog: could not drop schema {name}: {type(e).__name__}: {e}", file=sys.stderr)
                time.sleep(0.5)
    return dropped


class Guard:
    """A run's watchdog, started first (``python -m chaos.watchdog`` in its own session, a pipe on
    its stdin): from then on a SIGKILL of the run leaves nothing behind. ``note_pid``/``note_dir``
    list what it is to kill and remove; ``close()``, after the run's own cleanup, ends it (it then
    kills what is still listed and alive, and removes ``tmp``). ``dsn``: the schemas a ``--dsn``
    run names in ``tmp/schemas`` are dropped (the DSN only in its environment, never on disk)."""

    def __init__(self, tmp: str, dsn: str | None = None):
        import subprocess

        from chaos.faults import procs

        self.pidfile, self.dirsfile = os.path.join(tmp, "pids"), os.path.join(tmp, "dirs")
        open(self.pidfile, "w").close()
        open(self.dirsfile, "w").close()
        env = dict(os.environ, **({DSN_ENV: dsn} if dsn else {}))
        self.popen = subprocess.Popen([sys.executable, "-m", "chaos.watchdog", self.pidfile, tmp, self.dirsfile],
                                      stdin=subprocess.PIPE, start_new_session=True, env=env)
        procs.register(self.popen.pid)

    def note_pid(self, pid: int) -> None:
        with open(self.pidfile, "a") as f:
            f.write(f"{pid} {start_time(pid)}\n")

    def note_dir(self, path: str) -> None:
        with open(self.dirsfile, "a") as f:
            f.write(path + "\n")

    def close(self) -> None:
        from chaos.faults import procs

        try:
            self.popen.stdin.close()
            self.popen.wait(timeout=10)
        except Exception:
            procs.ProcessTree(self.popen.pid, popen=self.popen).kill()
        procs.unregister(self.popen.pid)


def main(argv: list[str]) -> int:
    pidfile, tmpdir = argv[0], argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the runner; we wait for its end
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    kill_listed(pidfile)
    time.sleep(0.05)  # let the killed postmaster's children notice, then sweep again
    kill_listed(pidfile)
    drop_listed_schemas(tmpdir, os.environ.get(DSN_ENV))
    if len(argv) > 2:
        remove_listed_dirs(argv[2])
    shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
