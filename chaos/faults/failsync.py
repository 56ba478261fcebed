"""fsync failure on demand: our LD_PRELOAD shim (``failsync.c``, notes §3).

libfiu segfaults PostgreSQL (its ``hash_create`` clashes with postgres's own),
so the suite builds its own 17-line shim with the system ``gcc`` on first use.

Usage::

    fault = FsyncFault("/tmp/ccX/failsync.ctl")       # the dir must be traversable by the target
    proc = subprocess.Popen(cmd, env={**os.environ, **fault.env()})
    fault.arm()      # fsync/fdatasync/syncfs now fail with EIO in the whole tree
    fault.disarm()   # back to normal
    fault.cleanup()

Expect: SQLite raises ``disk I/O error`` (SQLITE_IOERR_FSYNC) on the commit;
PostgreSQL PANICs, and its postmaster exits while the fault stays armed. A
failed commit may still have persisted: record it as indeterminate.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("failsync.c")
LIBNAME = "failsync"


def _world_traversable(path: Path) -> bool:
    """True when every directory from / to ``path`` is o+x (so an
    unprivileged server such as ``postgres`` can load a library in it)."""
    p = path.resolve()
    for d in [p, *p.parents]:
        try:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return False
        except FileNotFoundError:
            continue
    return True


def cache_dir() -> Path:
    """Where built or copied fault libraries live.

    ``$XDG_CACHE_HOME/claim-chaos`` or ``~/.cache/claim-chaos`` when every
    parent is world-traversable; otherwise (e.g. ``/root`` is 0700)
    ``/tmp/claim-chaos-cache-<uid>``, because a library preloaded into the
    ``postgres`` user's server must be readable by it (ld.so skips an
    unreadable preload *silently*).
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "claim-chaos"
    if not _world_traversable(base.parent if not base.exists() else base):
        base = Path(tempfile.gettempdir()) / f"claim-chaos-cache-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    st = os.lstat(base)
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        raise RuntimeError(f"refusing cache dir {base}: not a directory owned by us")
    os.chmod(base, 0o755)
    return base


def build() -> str:
    """Compile ``failsync.c`` once per source version; returns the .so path."""
    return build_shim(SOURCE, LIBNAME)


def build_shim(source: Path, libname: str) -> str:
    """Compile a preload shim's C source once per source version; returns the .so path.

    The output name carries the source hash, and the compile writes a temp
    file renamed into place, so concurrent builders never see a partial .so.
    """
    src = source.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    out = cache_dir() / f"{libname}-{digest}.so"
    if out.exists():
        return str(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        res = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(tmp), str(source), "-ldl"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"building the {libname} shim failed: {res.stderr.strip()}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return str(out)


class FsyncFault:
    """Switch fsync failures of a target process tree with a control file.

    ``match``: only fail syncs of files whose path contains this substring
    (e.g. ``"/pg_wal/"`` or ``"/base/"``); None fails every sync.
    """

    def __init__(self, ctl_path: str, match: str | None = None):
        self.ctl_path = os.path.abspath(ctl_path)
        self.match = match
        self.library = build()

    def env(self, ld_preload: str | None = None) -> dict:
        """Environment for the target. ``ld_preload``: other libraries to
        preload as well (space separated, e.g. libfaketime)."""
        preload = " ".join(x for x in (ld_preload, self.library) if x)
        env = {"LD_PRELOAD": preload, "FAILSYNC_FILE": self.ctl_path}
        if self.match:
            env["FAILSYNC_MATCH"] = self.match
        return env

    def arm(self) -> None:
        with open(self.ctl_path, "w"):
            pass
        os.chmod(self.ctl_path, 0o644)

    def disarm(self) -> None:
        try:
            os.unlink(self.ctl_path)
        except FileNotFoundError:
            pass

    @property
    def armed(self) -> bool:
        return os.path.exists(self.ctl_path)

    def cleanup(self) -> None:
        self.disarm()
