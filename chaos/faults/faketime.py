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
import shutil
import stat
import time
from pathlib import Path

from chaos.faults.failsync import _world_traversable, cache_dir

LIBNAME = "libfaketime"


def _wheel_library() -> Path:
    spec = importlib.util.find_spec("libfaketime")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PyPI package libfaketime==3.0.1 is not installed")
    return Path(spec.submodule_search_locations[0]) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"


def library_path() -> str:
    """Path of the PyPI libfaketime .so, readable by every user (copied to the
    cache dir when the wheel lives somewhere ``postgres`` cannot read)."""
    src = _wheel_library()
    if not src.exists():
        raise RuntimeError(f"libfaketime .so not found at {src}")
    if _world_traversable(src.parent) and os.stat(src).st_mode & stat.S_IROTH:
        return str(src)
    data = src.read_bytes()
    out = cache_dir() / f"libfaketime-{hashlib.sha256(data).hexdigest()[:16]}.so.1"
    if not out.exists():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
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
