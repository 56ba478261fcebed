"""Power loss for file-backed stores: every change not covered by a completed
fsync is lost (or torn) at a "power-off".

The mechanism is a preload shim (``powerloss.c``, built with the system gcc
like ``failsync.c``): a process run with ``PowerLoss.env()`` appends, before
every change to a path under ``prefix``, an undo record to one shared log
(the old bytes of a write, the cut bytes of a truncate, a new name, a removed
name kept alive by a hard link in the stash, a rename), and after every
successful fsync/fdatasync a sync marker for that inode. ``power_off`` is
called once every process of the target has been SIGKILLed: it replays the
log and undoes whatever no later sync covers, so the files hold what a disk
that kept only synced data would hold.

What "covered" means (POSIX, not the stronger ordering of one file system):

* a file's bytes and size are durable after an fsync/fdatasync **of that
  inode** (by any process);
* a directory entry (create, link, mkdir, unlink, rmdir, rename) is durable
  after an fsync **of the directory** holding it (both directories for a
  rename across two); ``syncfs``/``sync`` cover everything.

So SQLite's rollback journal survives a crash only if its directory was synced
after it was created, and its deletion (the commit point in DELETE mode) is
undone unless the directory is synced afterwards (SQLite does that only with
``synchronous=EXTRA``); a git object written without fsync (git's default) is
lost, and so is a ``rename`` whose directory was never synced.

``mode="drop"``: every uncovered change is undone (the harshest legal disk).
``mode="torn"``: seeded: each 512-byte sector of uncovered writes ends as one
of the versions it had since its last sync (a disk that reorders and tears
writes), a file's size is either its synced or its current one, and the
directory changes keep a random prefix (a journaled file system persists
metadata in order).

Not covered (documented in ``docs/faults.md``): mmap'd writes, sendfile and
copy_file_range, fallocate, processes not started with the preload, and
unlocked writers racing on one byte range. A statically linked program or one
that makes raw system calls bypasses the shim (check the log is growing).

Usage::

    pl = PowerLoss(run_tmp, prefix="/path/to/claims.db")
    proc = subprocess.Popen(cmd, env={**os.environ, **pl.env()})
    pl.halt_after(5)        # optional: wait until a process stopped itself mid-write
    kill every process of the target (and reap it); pl.unhalt()
    stats = pl.power_off(mode="drop", seed=7)   # {"undone": n, ...}; the log starts afresh
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

from chaos.faults.failsync import build_shim

SOURCE = Path(__file__).with_name("powerloss.c")
LIBNAME = "powerloss"
SECTOR = 512


def build() -> str:
    """Compile ``powerloss.c`` once per source version; returns the .so path."""
    return build_shim(SOURCE, LIBNAME)


# --------------------------------------------------------------------------- the log


@dataclass
class Rec:
    type: str
    pid: int
    seq: int
    f: dict = field(default_factory=dict)


class _Reader:
    def __init__(self, body: bytes):
        self.b, self.i = body, 0

    def u64(self) -> int:
        (v,) = struct.unpack_from("<Q", self.b, self.i)
        self.i += 8
        return v

    def raw(self, n: int) -> bytes:
        v = self.b[self.i:self.i + n]
        if len(v) != n:
            raise ValueError("short record")
        self.i += n
        return v

    def str(self) -> str:
        (n,) = struct.unpack_from("<I", self.b, self.i)
        self.i += 4
        return self.raw(n).decode("utf-8", "surrogateescape")

    def dir(self) -> tuple:
        return (self.u64(), self.u64()), self.str()


def _body(t: str, r: _Reader) -> dict:
    if t == "W":
        dev, ino, off, length, old_size, have = (r.u64() for _ in range(6))
        old = r.raw(have)
        return {"key": (dev, ino), "off": off, "len": length, "old_size": old_size, "old": old, "path": r.str()}
    if t == "T":
        dev, ino, new_size, old_size, cut = (r.u64() for _ in range(5))
        old = r.raw(cut)
        return {"key": (dev, ino), "new_size": new_size, "old_size": old_size, "old": old, "path": r.str()}
    if t == "C":
        d, dp = r.dir()
        return {"dirs": {d}, "dir": dp, "name": r.str()}
    if t == "U":
        d, dp = r.dir()
        name, stash = r.str(), r.str()
        return {"dirs": {d}, "dir": dp, "name": name, "stash": stash, "isdir": bool(r.u64())}
    if t == "R":
        fd, fdp = r.dir()
        fname = r.str()
        td, tdp = r.dir()
        tname, stash = r.str(), r.str()
        return {"dirs": {fd, td}, "from": os.path.join(fdp, fname), "to": os.path.join(tdp, tname),
                "stash": stash, "exchange": bool(r.u64())}
    if t in "SA":
        return {"key": (r.u64(), r.u64())}
    if t == "X":
        return {"cancels": r.u64()}
    if t == "H":
        return {}
    raise ValueError(f"unknown record type {t!r}")


def parse(data: bytes) -> tuple[list[Rec], int]:
    """The complete records at the start of ``data`` and the bytes they take
    (a record cut short, by a SIGKILL or because it is still being written, is left)."""
    out, i = [], 0
    while i + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, i)
        if n < 13 or i + 4 + n > len(data):
            break
        t = chr(data[i + 4])
        pid, seq = struct.unpack_from("<IQ", data, i + 5)
        out.append(Rec(t, pid, seq, _body(t, _Reader(data[i + 17:i + 4 + n]))))
        i += 4 + n
    return out, i


def read_log(path: str) -> list[Rec]:
    """Every complete record of the log, in order."""
    try:
        return parse(Path(path).read_bytes())[0]
    except FileNotFoundError:
        return []


class Pending:
    """What no later sync covers, fed with the log as it grows: ``data``
    ({inode: [W/T records]}) and ``names`` ([C/U/R records]), in log order."""

    def __init__(self):
        self.data: dict[tuple, list[Rec]] = {}
        self._names: list[tuple[Rec, set]] = []
        self._by_id: dict[tuple, Rec] = {}
        self.records = 0
        self.halted: list[int] = []   # processes that stopped themselves for the cut (H), in log order

    @property
    def names(self) -> list[Rec]:
        return [m for m, _ in self._names]

    def __bool__(self) -> bool:
        return bool(self.data or self._names)

    def add(self, r: Rec) -> None:
        self.records += 1
        if r.type == "H":
            self.halted.append(r.pid)
            return
        if r.type == "X":   # the call that record announced failed: it changed nothing
            gone = self._by_id.pop((r.pid, r.f["cancels"]), None)
            self._names = [(m, need) for m, need in self._names if m is not gone]
            return
        if r.type in "WT":
            self.data.setdefault(r.f["key"], []).append(r)
        elif r.type in "CUR":
            self._names.append((r, set(r.f["dirs"])))
            self._by_id[(r.pid, r.seq)] = r
        elif r.type == "S":
            self.data.pop(r.f["key"], None)
            for _, need in self._names:
                need.discard(r.f["key"])
            self._names = [(m, need) for m, need in self._names if need]
        elif r.type == "A":  # syncfs / sync: everything on that file system (dev 0: every one)
            dev = r.f["key"][0]
            self.data = {k: v for k, v in self.data.items() if dev and k[0] != dev}
            self._names = [(m, need) for m, need in self._names if dev and any(d[0] != dev for d in need)]


def pending(recs: list[Rec]) -> Pending:
    p = Pending()
    for r in recs:
        p.add(r)
    return p


# --------------------------------------------------------------------------- undo


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _undo_name(r: Rec) -> bool:
    """Undo one name change; True when something on disk really changed."""
    f = r.f
    if r.type == "C":
        path = os.path.join(f["dir"], f["name"])
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            return True
        if _exists(path):
            os.unlink(path)
            return True
    elif r.type == "U":
        path = os.path.join(f["dir"], f["name"])
        if f["isdir"]:
            if not _exists(path):
                os.mkdir(path)
                return True
        elif f["stash"] and os.path.exists(f["stash"]) and not _exists(path):
            os.link(f["stash"], path)
            return True
    elif r.type == "R":
        src, dst = f["from"], f["to"]
        if f["exchange"]:
            if _exists(src) and _exists(dst):
                tmp = dst + ".powerloss-swap"
                os.rename(dst, tmp)
                os.rename(src, dst)
                os.rename(tmp, src)
                return True
            return False
        moved = False
        if _exists(dst) and not _exists(src):
            os.rename(dst, src)
            moved = True
        if f["stash"] and os.path.exists(f["stash"]) and not _exists(dst):
            os.link(f["stash"], dst)
            moved = True
        return moved
    return False


def _locate(key: tuple, recs: list[Rec], extra_dirs: set[str]) -> str | None:
    """A path that names inode ``key`` now (names may have been undone)."""
    seen = []
    for r in reversed(recs):
        if r.f["path"] not in seen:
            seen.append(r.f["path"])
    for d in extra_dirs:
        try:
            seen += [os.path.join(d, n) for n in os.listdir(d)]
        except OSError:
            pass
    for p in seen:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == key:
            return p
    return None


def _undo_data(path: str, recs: list[Rec], rng: random.Random | None) -> int:
    """Undo a file's uncovered writes (drop), or tear them sector by sector (rng).
    Returns how many bytes really changed (a write announced but never made restores nothing)."""
    restored = 0
    settled: set[int] = set()
    fd = os.open(path, os.O_RDWR)
    try:
        current = os.fstat(fd).st_size
        synced_size = recs[0].f["old_size"]
        keep_size = rng is not None and rng.random() < 0.5
        for r in reversed(recs):
            f = r.f
            start = f["off"] if r.type == "W" else f["new_size"]
            end = start + (f["len"] if r.type == "W" else len(f["old"]))
            old = f["old"]
            for s in range(start // SECTOR, (max(end, start + 1) - 1) // SECTOR + 1):
                if s in settled:
                    continue
                if rng is not None and rng.random() < 0.4:  # this sector keeps the version this write left
                    settled.add(s)
                    continue
                lo, hi = max(start, s * SECTOR), min(end, (s + 1) * SECTOR)
                piece = old[lo - start:hi - start]
                if piece:
                    now = os.pread(fd, len(piece), lo)
                    restored += sum(x != y for x, y in zip(now, piece)) + len(piece) - len(now)
                    os.pwrite(fd, piece, lo)
                if len(piece) < hi - lo and keep_size:  # bytes the write appended: never written, so zeros
                    os.pwrite(fd, bytes(hi - lo - len(piece)), lo + len(piece))
        os.ftruncate(fd, current if keep_size else synced_size)
        if not keep_size:
            restored += abs(current - synced_size)
    finally:
        os.close(fd)
    return restored


class PowerLoss:
    """The power-loss fault of one target: ``env()`` for its processes, ``power_off()`` once they are dead."""

    def __init__(self, work_dir: str, prefix: str):
        self.dir = os.path.abspath(work_dir)
        self.prefix = os.path.abspath(prefix) + (os.sep if prefix.endswith(os.sep) else "")
        self.log = os.path.join(self.dir, "powerloss.log")
        self.halt_file = os.path.join(self.dir, "powerloss.halt")
        self.stash = os.path.join(self.dir, "powerloss-stash")
        os.makedirs(self.stash, exist_ok=True)
        if os.stat(self.stash).st_dev != os.stat(os.path.dirname(self.prefix.rstrip(os.sep)) or "/").st_dev:
            raise RuntimeError(f"power-loss stash {self.stash} is not on the file system of {self.prefix} "
                               "(removed files are kept alive by hard links)")
        self.library = build()
        self.offs = 0
        self._fresh()

    def _fresh(self) -> None:
        open(self.log, "wb").close()
        self._read = 0
        self._tail = b""
        self.state = Pending()

    def env(self, ld_preload: str | None = None) -> dict:
        preload = " ".join(x for x in (ld_preload, self.library) if x)
        return {"LD_PRELOAD": preload, "POWERLOSS_LOG": self.log, "POWERLOSS_STASH": self.stash,
                "POWERLOSS_PREFIX": self.prefix, "POWERLOSS_HALT": self.halt_file}

    def halt_after(self, k: int) -> None:
        """Every target process SIGSTOPs itself right after its ``k``-th journaled
        change from now on (so a power-off can come mid-transaction)."""
        tmp = self.halt_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(max(1, int(k))))
        os.replace(tmp, self.halt_file)

    def unhalt(self) -> None:
        try:
            os.unlink(self.halt_file)
        except FileNotFoundError:
            pass

    def journaled(self) -> int:
        """Bytes of undo log written since the last power-off (evidence that the shim is loaded)."""
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def refresh(self) -> Pending:
        """Read what the log gained since the last call; the pending state."""
        with open(self.log, "rb") as f:
            f.seek(self._read)
            chunk = f.read()
        self._read += len(chunk)
        recs, used = parse(self._tail + chunk)
        self._tail = (self._tail + chunk)[used:]
        for r in recs:
            self.state.add(r)
        return self.state

    def power_off(self, mode: str = "drop", seed: int = 0) -> dict:
        """Undo every uncovered change. Call only when no process of the target is alive."""
        if mode not in ("drop", "torn"):
            raise ValueError(f"power-loss mode {mode!r}: expected drop or torn")
        rng = random.Random(seed) if mode == "torn" else None
        state = self.refresh()
        names = state.names
        if rng is not None:
            names = names[rng.randint(0, len(names)):]   # a journaled fs persists a prefix of them, in order
        undone_names = sum(_undo_name(r) for r in reversed(names))
        dirs = {self.stash} | {r.f["dir"] for r in names if "dir" in r.f}
        dirs |= {os.path.dirname(r.f["path"]) for rs in state.data.values() for r in rs}
        files, restored, unlocatable = 0, 0, 0
        for key, rs in state.data.items():
            path = _locate(key, rs, dirs)
            if path is None:   # its every name was removed (or undone): nothing can read it
                unlocatable += 1
                continue
            changed = _undo_data(path, rs, rng)
            restored += changed
            files += changed > 0
        for n in os.listdir(self.stash):
            os.unlink(os.path.join(self.stash, n))
        # (no byte count of the undo log: its records carry absolute paths, and the evidence of a
        # deterministic run must not depend on where its store lies)
        out = {"mode": mode, "records": state.records,
               "pending_names": len(state.names), "pending_files": len(state.data), "undone_names": undone_names,
               "undone_files": files, "undone_bytes": restored, "unreachable_inodes": unlocatable,
               "undone": undone_names + files}
        self._fresh()
        self.offs += 1
        return out

    def cleanup(self) -> None:
        self.unhalt()
        shutil.rmtree(self.stash, ignore_errors=True)
        try:
            os.unlink(self.log)
        except FileNotFoundError:
            pass
