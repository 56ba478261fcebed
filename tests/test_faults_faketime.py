"""libfaketime on real child processes: the wall clock moves back an hour at
once while monotonic time keeps going; ms-exact absolute times; combined
with the fsync shim in one LD_PRELOAD."""

from __future__ import annotations

import os
import subprocess
import sys

from chaos.faults.failsync import FsyncFault
from chaos.faults.faketime import ClockFault, format_absolute, library_path, preloaded

CHILD = r"""
import sys, time
for line in sys.stdin:
    print(time.time_ns() // 1_000_000, time.monotonic_ns() // 1_000_000, flush=True)
"""


def _child(env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD], env={**os.environ, **env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ask(p: subprocess.Popen) -> tuple[int, int]:
    p.stdin.write("\n")
    p.stdin.flush()
    wall, mono = p.stdout.readline().split()
    return int(wall), int(mono)


def _stop(p: subprocess.Popen) -> None:
    p.stdin.close()
    p.wait(10)


def test_library_is_our_build_readable_by_everyone():
    path = library_path()
    assert path.endswith("libfaketime.so.1") and os.stat(path).st_mode & 0o004


def test_library_fakes_the_clock_but_does_not_intercept_condition_waits():
    # the PyPI .so exports pthread_cond_timedwait: every blocked thread handoff of
    # a Python host then costs tens of ms (chaos.faults.faketime docstring)
    out = subprocess.run(["nm", "-D", "--defined-only", library_path()], capture_output=True, text=True,
                         check=True).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    assert "clock_gettime" in names and "gettimeofday" in names
    assert not any(n.startswith("pthread_cond") for n in names), sorted(n for n in names if "pthread" in n)


def test_wall_clock_goes_back_an_hour_while_monotonic_keeps_going(tmp_path):
    clock = ClockFault(str(tmp_path / "clock"))
    p = _child(clock.env())
    try:
        wall0, mono0 = _ask(p)
        assert preloaded(p.pid, "libfaketime")
        clock.set_offset(-3600)
        wall1, mono1 = _ask(p)
        assert -3_600_000 - 5_000 < wall1 - wall0 < -3_600_000 + 5_000
        assert mono1 >= mono0
        clock.reset()
        wall2, mono2 = _ask(p)
        assert abs(wall2 - wall0) < 5_000 and mono2 >= mono1
    finally:
        _stop(p)
        clock.cleanup()


def test_absolute_time_is_ms_exact_and_frozen(tmp_path):
    clock = ClockFault(str(tmp_path / "clock"))
    p = _child(clock.env())
    try:
        for ms in (1_894_352_400_000, 1_894_352_400_001, 1_894_352_400_123, 1_894_352_400_999, 1_894_352_401_009):
            clock.set_absolute(ms)
            assert _ask(p)[0] == ms and _ask(p)[0] == ms  # frozen: no tick between calls
    finally:
        _stop(p)
        clock.cleanup()
    assert format_absolute(1_894_352_400_123) == "2030-01-11 09:00:00.123500"


def test_faketime_and_fsync_shim_in_one_preload(tmp_path):
    fsync = FsyncFault(str(tmp_path / "ctl"))
    clock = ClockFault(str(tmp_path / "clock"))
    env = {**fsync.env(), **clock.env(ld_preload=fsync.env()["LD_PRELOAD"])}
    assert env["LD_PRELOAD"] == f"{fsync.library} {clock.library}" and env["FAILSYNC_FILE"]
    code = ("import os, time, sys\n"
            "fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY)\n"
            "try:\n    os.fsync(fd); print('synced', time.time_ns() // 1_000_000)\n"
            "except OSError as e:\n    print('eio' if e.errno == 5 else e, time.time_ns() // 1_000_000)\n")
    clock.set_absolute(1_894_352_400_000)
    fsync.arm()
    try:
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=30)
    finally:
        fsync.cleanup()
        clock.cleanup()
    assert out.stdout.split() == ["eio", "1894352400000"], out.stderr
