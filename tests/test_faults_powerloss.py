"""The power-loss shim on real processes: un-fsynced bytes, sizes and names are
undone at a power-off, fsynced ones survive; SQLite with synchronous=OFF loses
acknowledged commits, FULL loses the last one in DELETE mode (its commit, the
journal unlink, is never made durable) and EXTRA loses none."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from chaos.faults.powerloss import SECTOR, PowerLoss, parse, pending, read_log

FILES_CHILD = r"""
import os, sys
d = sys.argv[1]
dfd = os.open(d, os.O_RDONLY)
fd = os.open(d + "/a", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"synced-1\n"); os.fsync(fd); os.fsync(dfd)   # a: its name and first line are durable
os.write(fd, b"unsynced-2\n")                               # appended, never synced
os.pwrite(fd, b"SYN", 0)                                    # overwritten, never synced
t = os.open(d + "/b.tmp", os.O_WRONLY | os.O_CREAT, 0o644); os.write(t, b"new-b\n"); os.fsync(t); os.close(t)
os.rename(d + "/b.tmp", d + "/b"); os.fsync(dfd)           # b: an atomic replace, directory synced
os.unlink(d + "/gone")                                      # never synced: comes back
t = os.open(d + "/c.tmp", os.O_WRONLY | os.O_CREAT, 0o644); os.write(t, b"new-c\n"); os.fsync(t); os.close(t)
os.rename(d + "/c.tmp", d + "/c")                           # c: replaced, directory NOT synced: old c comes back
fd2 = os.open(d + "/fresh", os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd2, b"x"); os.fsync(fd2)  # name never synced
os.ftruncate(os.open(d + "/keep", os.O_RDWR), 2)             # cut, never synced
print("ready", flush=True); sys.stdin.readline()
"""

SQLITE_CHILD = r"""
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=DELETE"); c.execute("PRAGMA synchronous=" + sys.argv[2])
for i in range(int(sys.argv[3])):
    c.execute("BEGIN IMMEDIATE"); c.execute("INSERT INTO t VALUES (?)", (i,)); c.execute("COMMIT")
print("ready", flush=True); sys.stdin.readline()
"""


def _run_then_cut(pl: PowerLoss, args: list[str], mode: str = "drop", seed: int = 0) -> dict:
    """Run a child under the shim until it says ready, SIGKILL it, power off."""
    p = subprocess.Popen([sys.executable, "-c", *args], env={**os.environ, **pl.env()}, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
    finally:
        p.kill()
        p.wait()
    return pl.power_off(mode, seed)


def _durable(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_uncovered_bytes_sizes_and_names_are_undone_covered_ones_survive(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for name, data in (("b", b"old-b\n"), ("c", b"old-c\n"), ("gone", b"keep\n"), ("keep", b"12345\n")):
        _durable(d / name, data)
    pl = PowerLoss(str(tmp_path / "pl"), str(d) + os.sep)
    stats = _run_then_cut(pl, [FILES_CHILD, str(d)])
    got = {n: (d / n).read_bytes() for n in sorted(os.listdir(d))}
    assert got == {"a": b"synced-1\n", "b": b"new-b\n", "c": b"old-c\n", "gone": b"keep\n", "keep": b"12345\n"}
    assert stats["undone"] > 0 and stats["undone_names"] >= 3
    assert os.listdir(pl.stash) == [] and os.path.getsize(pl.log) == 0   # a fresh log after the power-off


def test_nothing_outside_the_prefix_is_touched(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for name, data in (("b", b"old-b\n"), ("c", b"old-c\n"), ("gone", b"keep\n"), ("keep", b"12345\n")):
        _durable(d / name, data)
    pl = PowerLoss(str(tmp_path / "pl"), str(tmp_path / "elsewhere"))
    stats = _run_then_cut(pl, [FILES_CHILD, str(d)])
    assert stats["undone"] == 0 and stats["pending_names"] == stats["pending_files"] == 0
    assert (d / "c").read_bytes() == b"new-c\n" and not (d / "gone").exists()


def _sqlite_rows(tmp_path, synchronous: str, n: int = 30) -> tuple[int, str]:
    d = tmp_path / synchronous
    d.mkdir()
    db = d / "db.sqlite"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE t (x INTEGER)")
    c.commit()
    c.close()
    pl = PowerLoss(str(tmp_path / f"pl-{synchronous}"), str(db))
    _run_then_cut(pl, [SQLITE_CHILD, str(db), synchronous, str(n)])
    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT count(*) FROM t").fetchone()[0], c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()


def test_sqlite_synchronous_decides_what_survives_a_power_loss(tmp_path):
    """30 acknowledged commits each: OFF keeps none (never fsynced), FULL all but the
    last (the journal unlink that commits it is not made durable), EXTRA all."""
    assert _sqlite_rows(tmp_path, "OFF") == (0, "ok")
    assert _sqlite_rows(tmp_path, "FULL") == (29, "ok")
    assert _sqlite_rows(tmp_path, "EXTRA") == (30, "ok")


def test_torn_mode_leaves_each_sector_at_one_of_its_versions(tmp_path):
    """Random overlapping unsynced writes; after a torn power-off every sector
    holds a version it really had since the last sync, never a mixture."""
    d = tmp_path / "data"
    d.mkdir()
    size = 8 * SECTOR
    base = bytes([0x2E]) * size
    _durable(d / "f", base)
    writes = []
    rng = random.Random(5)
    for i in range(12):
        off = rng.randrange(0, size // SECTOR) * SECTOR
        writes.append((off, bytes([0x41 + i]) * SECTOR * rng.randint(1, 2)))
    child = "import os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n" + "".join(
        f"os.pwrite(fd, {data!r}, {off})\n" for off, data in writes) + "print('ready', flush=True); sys.stdin.readline()\n"
    outcomes = set()
    for seed in range(6):
        _durable(d / "f", base)
        pl = PowerLoss(str(tmp_path / f"pl{seed}"), str(d / "f"))
        _run_then_cut(pl, [child, str(d / "f")], mode="torn", seed=seed)
        got = (d / "f").read_bytes()
        assert len(got) == size
        for s in range(size // SECTOR):
            versions = {base[s * SECTOR:(s + 1) * SECTOR]}
            for off, data in writes:
                if off <= s * SECTOR < off + len(data):
                    versions.add(data[s * SECTOR - off:(s + 1) * SECTOR - off])
            sector = got[s * SECTOR:(s + 1) * SECTOR]
            assert sector in versions, (seed, s)
        outcomes.add(got)
    assert len(outcomes) > 1   # the seed decides how it tears


def test_log_reader_drops_a_cut_record_and_honours_cancels(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl = PowerLoss(str(tmp_path / "pl"), str(d) + os.sep)
    child = ("import os, sys\nd = sys.argv[1]\n"
             "try:\n    os.rename(d + '/missing', d + '/x')\nexcept FileNotFoundError:\n    pass\n"
             "os.open(d + '/y', os.O_WRONLY | os.O_CREAT)\nprint('ready', flush=True); sys.stdin.readline()\n")
    p = subprocess.Popen([sys.executable, "-c", child, str(d)], env={**os.environ, **pl.env()},
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.kill()
    p.wait()
    recs = read_log(pl.log)
    assert [r.type for r in recs] == ["R", "X", "C"]
    assert [r.type for r in pending(recs).names] == ["C"]   # the failed rename changed nothing
    data = open(pl.log, "rb").read()
    assert len(parse(data[:-3])[0]) == 2                    # a record cut short is not read


WRITER = ("import os, sys\n"
          "def work():\n"
          "    fd = os.open(sys.argv[1] + '/f', os.O_WRONLY | os.O_CREAT)\n"
          "    for i in range(int(sys.argv[2])):\n        os.write(fd, b'x')\n")


def _halted_writer(tmp_path, k: int, child: str, writes: int, continued: int = 0) -> tuple[int, list[str]]:
    """Run ``child`` (it writes ``writes`` bytes one by one) under the shim with a halt after ``k``
    changes; once it is stopped (and, ``continued`` times, SIGCONTed and stopped again, as another fault's
    heal may continue it): the size of what it wrote and the log's record types."""
    import psutil

    d = tmp_path / "data"
    d.mkdir()
    pl = PowerLoss(str(tmp_path / "pl"), str(d) + os.sep)
    pl.halt_after(k)
    p = subprocess.Popen([sys.executable, "-c", child, str(d), str(writes)], env={**os.environ, **pl.env()})
    try:
        for n in range(continued + 1):
            if n:
                p.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 20
            while (psutil.Process(p.pid).status() != psutil.STATUS_STOPPED
                   or [r.type for r in read_log(pl.log)].count("H") <= n):
                assert time.monotonic() < deadline and p.poll() is None
                time.sleep(0.005)
        return (d / "f").stat().st_size, [r.type for r in read_log(pl.log)]
    finally:
        p.kill()
        p.wait()
        pl.cleanup()


@pytest.mark.parametrize("k", [1, 5])
def test_halt_stops_a_writer_right_after_its_kth_change(tmp_path, k):
    size, _ = _halted_writer(tmp_path, k, WRITER + "work()\n", 20)
    assert size == k - 1   # the create counts as its first change


def test_a_halted_writer_continued_before_the_power_off_stops_again(tmp_path):
    # a pause that found the halted writer stopped, resumed before the power-off held it, continued it:
    # it ran on past the cut (the old shim: it wrote all 20 bytes and exited)
    size, types = _halted_writer(tmp_path, 3, WRITER + "work()\n", 20, continued=2)
    assert size == 2 and types == ["C", "W", "W", "H", "H", "H"]


def test_halt_stops_a_writer_thread_at_its_kth_change_not_when_the_main_thread_notices(tmp_path):
    # A SIGSTOP sent to the process is taken by its main thread, which stops the others when the
    # scheduler gets to it; meanwhile the writer thread ran on and finished a whole transaction (a
    # power-off then found everything synced: a CI run ended unknown for "power-loss never took effect")
    child = WRITER + "import threading\nt = threading.Thread(target=work); t.start(); t.join()\n"
    size, types = _halted_writer(tmp_path, 3, child, 20000)
    assert size == 2 and types == ["C", "W", "W", "H"]   # its halt, nothing after its 3rd change
