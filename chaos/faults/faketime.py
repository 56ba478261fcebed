"""Per-process wall-clock faults with the PyPI libfaketime (notes §2).

Use the PyPI ``libfaketime==3.0.1`` .so, not Debian's 0.9.10 (broken with
Python 3.11). It fakes only the wall clock (clock_gettime, gettimeofday,
time, ...); with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` monotonic time, sleeps
and timeouts stay real.

Usage::

    clock = ClockFault("/tmp/ccX/clock")               # dir traversable by the target
    proc = subprocess.Popen(cmd, env={**os.environ, **clock.env()})
    clock.set_offset(-3600)                            # time.time() jumps back 1 h, at once
    clock.set_absolute(1_894_352_400_123)              # frozen at 2030-01-11T09:00:00.123Z
    clock.reset()                                      # real time again
    assert preloaded(proc.pid, "libfaketime")

The library is built from the wheel's vendored source on first use (like
the fsync shim), with the flags of the PyPI build plus ``-UFAKE_PTHREAD``:
the PyPI .so intercepts ``pthread_cond_timedwait``, and with
``FAKETIME_DONT_FAKE_MONOTONIC=1`` every blocked thread handoff of a Python
process then costs tens of milliseconds (measured: a queue ping-pong between
two threads 0.03 ms plain, 2-31 ms with the PyPI .so, 0.03-0.24 ms with ours;
one host ``read`` call 0.3 ms plain, 10-50 ms with the PyPI .so, 0.3 ms with
ours). Our targets (CPython, Node's libuv, PostgreSQL latches, git) time
their waits on the monotonic clock, which is never faked, so nothing needs
the interception. And with ``-DFAKE_STATELESS``: the stock library creates
``/dev/shm/faketime_shm_<pid>`` and ``sem.faketime_sem_<pid>`` in every
process it is preloaded into and removes them only at a clean exit, so a run
whose targets are killed (or that exec) left pairs behind (issue 30); they
serve only the per-call tick ("i") and save/load-file modes, which the suite
never uses (it writes "+offset" and absolute times), so none are made.

Traps handled here: the file is written atomically (unparseable content makes
the target exit(1) on its next time call); libfaketime converts an absolute
time with ``mktime`` (local time), so ``env()`` pins ``TZ=UTC``; fractional
seconds are parsed with ``atof`` and truncated to ns, so an absolute time is
written as ``.mmm500`` (half a millisecond up) to stay ms-exact.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import time
from pathlib import Path

from chaos.faults.failsync import cache_dir

LIBNAME = "libfaketime"


def _wheel_library() -> Path:
    spec = importlib.util.find_spec("libfaketime")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PyPI package libfaketime==3.0.1 is not installed")
    return Path(spec.submodule_search_locations[0]) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"


#: the PyPI build (notes §2: no FAKE_STAT, FAKE_UTIME, FAKE_SLEEP, FAKE_TIMERS,
#: FAKE_INTERNAL_CALLS) without FAKE_PTHREAD either, and stateless: no shared
#: memory in /dev/shm (see the module docstring)
BUILD_FLAGS = ("-std=gnu99", "-O2", "-fPIC", "-shared", '-DPREFIX="/usr/local"', '-DLIBDIRNAME="/lib/faketime"',
               "-DFAKE_STATELESS")


def library_path() -> str:
    """Path of our libfaketime .so (built once per source version into the
    cache dir, readable by every user so an unprivileged server can load it)."""
    src_dir = _wheel_library().parent
    source = src_dir / "libfaketime.c"
    if not source.exists():
        raise RuntimeError(f"libfaketime source not found at {source}")
    digest = hashlib.sha256(source.read_bytes() + " ".join(BUILD_FLAGS).encode()).hexdigest()[:16]
    out = cache_dir() / f"libfaketime-{digest}" / "libfaketime.so.1"
    if out.exists():
        return str(out)
    out.parent.mkdir(mode=0o755, exist_ok=True)
    os.chmod(out.parent, 0o755)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        res = subprocess.run(["gcc", *BUILD_FLAGS, "-Wl,-soname,libfaketime.so.1",
                              f"-Wl,--version-script={src_dir / 'libfaketime.map'}", "-o", str(tmp), str(source),
                              "-lpthread", "-ldl", "-lm", "-lrt"], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"building libfaketime failed: {res.stderr.strip()[-500:]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return str(out)


def format_absolute(ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.mmm500`` (UTC) for libfaketime's default format."""
    secs, milli = divmod(int(ms), 1000)
    t = time.gmtime(secs)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{milli:03d}500"


class ClockFault:
    """Skew the wall clock of a target started with ``env()`` by rewriting
    its timestamp file; every time call of the target re-reads it."""

    def __init__(self, ts_path: str):
        self.ts_path = os.path.abspath(ts_path)
        self.library = library_path()
        self._write("+0")

    def env(self, ld_preload: str | None = None) -> dict:
        """Environment for the target; ``ld_preload``: other libraries to
        preload too (space separated, e.g. the fsync shim)."""
        return {
            "LD_PRELOAD": " ".join(x for x in (ld_preload, self.library) if x),
            "FAKETIME_TIMESTAMP_FILE": self.ts_path,
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "TZ": "UTC",
        }

    def _write(self, text: str) -> None:
        tmp = f"{self.ts_path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.ts_path)

    def set_offset(self, seconds: float) -> None:
        """Real time plus ``seconds`` (negative = backwards), ticking."""
        self._write(f"{seconds:+.3f}")

    def set_absolute(self, ms: int, frozen: bool = True) -> None:
        """Pin the wall clock at ``ms`` since the Unix epoch (ms-exact).
        ``frozen=False`` starts the clock ticking from there (``@`` form)."""
        self._write(("" if frozen else "@") + format_absolute(ms))

    def reset(self) -> None:
        self._write("+0")

    def cleanup(self) -> None:
        for p in (self.ts_path,):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def preloaded(pid: int, libname: str = LIBNAME) -> bool:
    """True when ``libname`` is mapped into process ``pid`` (an unreadable
    preload is skipped silently by ld.so, so check after every start)."""
    try:
        return libname in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
