"""Read fixture files the way upstream does (vectors.md §2): regular files
only, under the fixture root, never through a symlink.

Every component below the root is checked with ``lstat`` (no following), the
last one is opened with ``O_NOFOLLOW`` and re-checked with ``fstat`` so a swap
between the check and the open cannot smuggle in a FIFO or a device.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from backends.safeload import MANIFEST
from chaos.errors import UsageError


def check_relative(rel: str, where: str) -> tuple[str, ...]:
    """The components of a fixture-relative path, or ``UsageError`` for an
    absolute path, ``..``, ``.``, empty components or backslashes."""
    if not isinstance(rel, str) or not rel:
        raise UsageError(f"{where}: path must be a non-empty string")
    if "\\" in rel or "\x00" in rel:
        raise UsageError(f"{where}: path {rel!r} has a forbidden character")
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise UsageError(f"{where}: absolute path {rel!r} is not allowed")
    parts = tuple(rel.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise UsageError(f"{where}: path {rel!r} must not contain '..', '.' or empty components")
    return parts


def check_root(root: Path) -> Path:
    """The fixture root must exist and be a directory."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        raise UsageError(f"{root}: vectors directory does not exist") from None
    except OSError as e:
        raise UsageError(f"{root}: cannot read vectors directory ({e.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{root}: vectors path is not a directory")
    return root


def _lstat_component(path: Path, shown: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise UsageError(f"{shown}: does not exist") from None
    except OSError as e:
        raise UsageError(f"{shown}: cannot stat ({e.strerror})") from None


def check_dir_under(root: Path, rel: str) -> Path:
    """``root/rel`` is a real directory reached without symlinks."""
    parts = check_relative(rel, str(root))
    cur = root
    for part in parts:
        cur = cur / part
        st = _lstat_component(cur, str(cur))
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{cur}: symlinks are not allowed in fixture paths")
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{cur}: not a directory")
    return cur


def read_regular(root: Path, rel: str) -> bytes:
    """The bytes of the regular file ``root/rel``; ``UsageError`` for a
    symlink anywhere below the root, a directory or a special file."""
    parts = check_relative(rel, str(root))
    cur = root
    for part in parts[:-1]:
        cur = cur / part
        st = _lstat_component(cur, str(cur))
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{cur}: symlinks are not allowed in fixture paths")
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{cur}: not a directory")
    target = cur / parts[-1]
    st = _lstat_component(target, str(target))
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{target}: symlinks are not allowed in fixture paths")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{target}: not a regular file")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise UsageError(f"{target}: cannot open ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{target}: not a regular file")
        chunks, total = [], 0
        while total <= MANIFEST.max_bytes:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > MANIFEST.max_bytes:
            raise UsageError(f"{target}: larger than the {MANIFEST.describe_bytes()} limit for fixture files")
        return b"".join(chunks)
    finally:
        os.close(fd)
