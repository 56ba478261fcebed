"""Kill a run's processes when the run itself dies, even by SIGKILL.

``chaos run`` starts ``python -m chaos.watchdog PIDFILE TMPDIR`` in its own
session with a pipe on stdin and keeps the write end. The watchdog blocks on
that pipe. End of file means the runner is gone (a normal exit closes it after
its own cleanup; a SIGKILL closes it through the kernel). It then SIGKILLs
every process listed in PIDFILE (``pid starttime`` lines, written by the
runner as it starts workers and servers) whose start time still matches, so a
recycled PID is never touched, and removes TMPDIR (preload control files).
SIGKILL also ends stopped (paused) workers, which a closed stdin would not.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def kill_listed(pidfile: str) -> list[int]:
    killed = []
    try:
        lines = open(pidfile).read().split("\n")
    except OSError:
        return killed
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if start_time(pid) == parts[1]:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed


def main(argv: list[str]) -> int:
    pidfile, tmpdir = argv[0], argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the runner; we wait for its end
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    kill_listed(pidfile)
    shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
