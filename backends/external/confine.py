"""Confine what an external program writes to the run's own directory (Linux Landlock).

The suite builds one Landlock ruleset per set of writable roots in its own
process (the ruleset is only a file descriptor: building it restricts
nothing), and each per-call child applies it between fork and exec
(``no_new_privs`` first, then ``landlock_restrict_self``), so the program and
everything it starts may create, write, truncate, remove, rename and link
files only beneath those roots and write ``/dev/null``. Reading and executing
are not restricted (node, git and python keep working). A write outside is
refused by the kernel with ``EACCES``: the program sees an error and the
suite records its reply as usual.

Only the rights the running kernel's Landlock ABI knows are requested
(``REFER`` from ABI 2, ``TRUNCATE`` from ABI 3). Where Landlock is missing,
``status()`` says why; the suite reports it (``chaos doctor``, a run note)
instead of degrading silently. The suite's own ``git`` calls
(``backends.external.git``) are not confined.
"""

from __future__ import annotations

import ctypes
import os
import threading

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446   # x86_64 and aarch64 alike
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << bit for bit in range(6, 13))   # char, dir, reg, sock, fifo, block, sym
_REFER = 1 << 13      # ABI 2: link/rename across directories
_TRUNCATE = 1 << 14   # ABI 3

#: writable files besides the roots (file rules take file rights only)
ALWAYS_WRITABLE_FILES = ("/dev/null",)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]   # the ABI-1 prefix; the kernel accepts a short struct


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    try:
        version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (AttributeError, OSError):
        return 0
    return max(int(version), 0)


def write_rights(abi: int) -> tuple[int, int]:
    """``(directory rights, file rights)`` that mean "may write" under ABI ``abi``."""
    directory = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    file = _WRITE_FILE
    if abi >= 2:
        directory |= _REFER
    if abi >= 3:
        directory |= _TRUNCATE
        file |= _TRUNCATE
    return directory, file


def status() -> tuple[bool, str]:
    """Whether writes can be confined here, and how or why not (one line)."""
    abi = abi_version()
    if abi > 0:
        return True, f"Landlock ABI {abi} (a write outside the run directory fails with EACCES)"
    errno = ctypes.get_errno()
    why = {38: "the kernel has no Landlock (ENOSYS)", 95: "Landlock is disabled at boot (EOPNOTSUPP)"}.get(
        errno, f"landlock_create_ruleset failed (errno {errno})")
    return False, f"{why}; external programs may write anywhere the user can"


def _fail(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"Landlock {what}: {os.strerror(errno)}")


def _build(roots: tuple[str, ...], abi: int) -> int:
    """A ruleset fd allowing writes beneath ``roots`` (and to ``ALWAYS_WRITABLE_FILES``)."""
    dir_rights, file_rights = write_rights(abi)
    attr = _RulesetAttr(dir_rights)
    fd = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                       ctypes.c_uint32(0))
    if fd < 0:
        raise _fail("create_ruleset")
    try:
        for path in [*roots, *ALWAYS_WRITABLE_FILES]:
            parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = dir_rights if os.path.isdir(path) else file_rights
                rule = _PathBeneathAttr(rights, parent)
                if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                 ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise _fail(f"add_rule {path}")
            finally:
                os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


_rulesets: dict[tuple[str, ...], int] = {}
_lock = threading.Lock()


def ruleset(roots) -> int | None:
    """The (cached, close-on-exec) ruleset fd for ``roots``; None where Landlock
    is unavailable (``status()`` says why). Every root must exist."""
    key = tuple(sorted({os.path.realpath(r) for r in roots}))
    with _lock:
        if key not in _rulesets:
            abi = abi_version()
            if abi <= 0:
                return None
            _rulesets[key] = _build(key, abi)
        return _rulesets[key]


def restrict_in_child(fd: int):
    """A ``preexec_fn`` applying ruleset ``fd`` to the child before it execs
    (two syscalls, no allocation worth the name between fork and exec)."""
    def restrict() -> None:
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise _fail("restrict_self")
    return restrict
