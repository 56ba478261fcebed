"""The run directory: ``store/<name>/<UTC timestamp>/`` and ``store/latest``.

Layout (docs/architecture.md): ``test.yaml`` (resolved config, seed and the
command that replays it), ``schedule.jsonl`` (the planned operation and fault
schedule, a pure function of seed + config), ``history.jsonl``,
``results.json``, ``report.html``/``junit.xml`` (chaos.reports), ``logs/``
(worker and server output) and ``tmp/`` (preload control files, sockets;
removed at the end of the run, and by the watchdog if the run is killed).

Nothing is written outside the store: a test name is one plain path component
(``check_name``), the run directory is created inside the store's real path,
and ``latest`` is a relative link to a directory inside it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import time

from chaos.errors import UsageError

#: a test name (and a matrix name): one path component, no dot or dash first
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")
RESERVED_NAMES = {"latest"}


def check_name(name, what: str = "--name") -> str:
    """``name`` if it is a safe test name, else ``UsageError`` (one line)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name in RESERVED_NAMES:
        raise UsageError(f"{what} {name!r}: a test name is 1-120 letters, digits, '.', '_' or '-', starting with a "
                         f"letter or digit, and not {', '.join(sorted(RESERVED_NAMES))} (it names a directory in the store)")
    return name


def writable_dir(root: str, flag: str = "--store") -> str:
    """Create the directory ``root`` (a store, a ledger) if needed and prove it
    writable by creating and removing a file in it; ``UsageError`` otherwise."""
    refuse_unusable_dir(root, flag)
    shown = root
    root = os.path.abspath(root)
    try:
        os.makedirs(root, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"{flag} {shown}: not a writable directory ({e.strerror or e})") from None
    return root


def refuse_unusable_dir(root: str, flag: str = "--store") -> None:
    """``UsageError`` now, creating nothing, for a ``root`` that ``writable_dir``
    could never make: it, or its nearest existing ancestor, is not a writable
    directory (the rest of the checks, and the creation, come later)."""
    path = os.path.abspath(root)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent
    if not os.path.isdir(path):
        itself = path == os.path.abspath(root)
        raise UsageError(f"{flag} {root}: "
                         + ("exists and is not a directory" if itself else "not a writable directory (Not a directory)"))
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {root}: not a writable directory (Permission denied)")


def inside(root: str, path: str) -> bool:
    """``path`` resolves (symlinks followed) to ``root`` or somewhere below it."""
    root, path = os.path.realpath(root), os.path.realpath(path)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class RunDir:
    def __init__(self, root: str, name: str):
        self.root = os.path.realpath(root)
        check_name(name)
        now = time.time()   # one read: seconds and milliseconds of one instant (two could straddle a second)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        base = os.path.join(self.root, name)
        if os.path.islink(base):  # a link could lead anywhere: the run would be written there
            raise UsageError(f"store {self.root}: {base} is a symlink; a run directory is never made through one")
        try:
            os.makedirs(base, exist_ok=True)
            self.path = _new_dir(os.path.join(base, stamp))
            os.mkdir(os.path.join(self.path, "logs"))
            _owned_tmp(self.tmp)
        except OSError as e:
            raise UsageError(f"store {self.root}: cannot create the run directory {os.path.join(base, stamp)} "
                             f"({e.strerror or e})") from None

    @property
    def tmp(self) -> str:
        return os.path.join(self.path, "tmp")

    def file(self, *parts: str) -> str:
        return os.path.join(self.path, *parts)

    def write_yaml(self, name: str, data: dict) -> None:
        with open(self.file(name), "w") as f:
            import yaml   # on first use: the per-call contract CLI imports this module but writes no YAML

            yaml.safe_dump(data, f, sort_keys=False, allow_unicode=True)

    def write_json(self, name: str, data: dict) -> None:
        tmp = self.file(name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.replace(tmp, self.file(name))

    def write_jsonl(self, name: str, rows) -> None:
        with open(self.file(name), "w") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":"), sort_keys=True) + "\n")

    def link_latest(self) -> str | None:
        """Point ``<root>/latest`` at this run (atomically, relative link).
        ``latest`` is a convenience: when something that is not a link is in
        its place (the user's directory or file) it is left alone, and so is
        a link that cannot be made; the reason is returned (``None``: linked)
        so the caller can say it, and the run's verdict is never lost to it."""
        link = os.path.join(self.root, "latest")
        assert inside(self.root, self.path), self.path  # RunDir never makes a run outside the store
        if os.path.lexists(link) and not os.path.islink(link):
            return f"{link} is not a symlink (left alone): the run is in {self.path}"
        tmp = f"{link}.tmp.{os.getpid()}"
        try:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            os.symlink(os.path.relpath(self.path, self.root), tmp)
            os.replace(tmp, link)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return f"{link} not updated ({e.strerror or e}): the run is in {self.path}"
        return None


def _new_dir(path: str) -> str:
    """Make ``path`` (or ``path-2``, ``path-3``...) exclusively: two runs started
    in the same millisecond (a campaign's workers) each get their own directory."""
    for n in range(1, 1000):
        candidate = path if n == 1 else f"{path}-{n}"
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free run directory name", path)


def _owned_tmp(tmp: str) -> None:
    """Create ``tmp/`` with its ``.owner`` already inside (made under another
    name, then renamed): another run's ``clean_stale_tmp`` never sees a live
    run's tmp without its owner, so it never takes it for a dead run's."""
    staging = f"{tmp}.new.{os.getpid()}"
    os.mkdir(staging)
    with open(os.path.join(staging, ".owner"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(staging, tmp)


def clean_stale_tmp(root: str) -> list[str]:
    """Remove ``tmp/`` dirs left under ``root`` by runs that were killed
    (their watchdog normally does it; this is the next start's sweep)."""
    import shutil

    removed = []
    if not os.path.isdir(root):
        return removed
    for name in os.listdir(root):
        base = os.path.join(root, name)
        if name == "latest" or not os.path.isdir(base) or os.path.islink(base):
            continue
        for run in _listdir(base):
            for entry in _listdir(os.path.join(base, run)):
                path = os.path.join(base, run, entry)
                if entry == "tmp":
                    dead = not _owner_alive(os.path.join(path, ".owner"))
                elif entry.startswith("tmp.new."):   # a run killed while it made its tmp/
                    dead = not entry[8:].isdigit() or not os.path.exists(f"/proc/{entry[8:]}")
                else:
                    continue
                if dead and os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
    return removed


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except (NotADirectoryError, FileNotFoundError):   # a file, or a run removed while we looked
        return []


def private_dir(prefix: str, root: str | None = None) -> str:
    """A new directory ``<root>/<prefix><pid>-XXXXXXXX`` for this process's scratch, after removing
    every ``<prefix><pid>-*`` there whose process is gone: what a SIGKILLed process left (its own
    cleanup never ran) is removed by the next one, as ``clean_stale_tmp`` does for a run's tmp/."""
    import shutil

    root = root or tempfile.gettempdir()
    for name in _listdir(root):
        pid, dash, _ = name[len(prefix):].partition("-") if name.startswith(prefix) else ("", "", "")
        if dash and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root)


def _owner_alive(owner_file: str) -> bool:
    try:
        pid = int(open(owner_file).read().strip())
    except (OSError, ValueError):
        return False
    return os.path.exists(f"/proc/{pid}")
