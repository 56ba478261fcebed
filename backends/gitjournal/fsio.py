"""Small durable-file primitives: directory fsync, exclusive create, atomic
replace. Every durable write of the Git-journal backend goes through here so
the fsync discipline of contract §6 is in one place."""

from __future__ import annotations

import os
import secrets

TMP_PREFIX = ".wb-tmp-"


def fsync_dir(path: str) -> None:
    """fsync a directory so a new or renamed entry in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def create_exclusive(path: str, data: bytes) -> None:
    """Create ``path`` with O_EXCL, write ``data``, fsync it and its directory.
    Raises ``FileExistsError`` when it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(path))


def makedirs_durable(path: str) -> None:
    """Create every missing directory of ``path``, fsyncing each parent after
    the new entry appears (a journal directory must survive a crash)."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            pass
        fsync_dir(os.path.dirname(d))


def tmp_name(directory: str, stem: str) -> str:
    return os.path.join(directory, f"{TMP_PREFIX}{stem}.{os.getpid()}.{secrets.token_hex(4)}")


def write_tmp(directory: str, stem: str, data: bytes) -> str:
    """Write ``data`` to a fresh temp file in ``directory`` and fsync it; the
    caller renames it into place. On any failure the temp file is removed."""
    tmp = tmp_name(directory, stem)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def in_pid_free_order(names: list[str]) -> list[str]:
    """Temp file names (``<stem>.<pid>.<token>``) in an order their writers' pids play no part in: a
    directory lists in its file system's hash order of the whole name, so where the same files had other
    pids (another run of one seed: the deterministic mode) they listed, and were handled, in another
    order."""
    def key(name: str) -> tuple[str, str]:
        stem, pid, token = (name.rsplit(".", 2) + ["", ""])[:3]
        return (stem, token) if pid.isdigit() else (name, "")
    return sorted(names, key=key)


def remove_stale_tmp(directory: str) -> int:
    """Remove temp files left by dead writers (the caller holds the namespace
    lock, so no live writer of this directory exists)."""
    removed = 0
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    for name in in_pid_free_order(names):
        if name.startswith(TMP_PREFIX):
            _unlink_quietly(os.path.join(directory, name))
            removed += 1
    return removed


def read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
