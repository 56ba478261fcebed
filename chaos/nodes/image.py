"""The node image: a root filesystem imported into a Docker daemon, built here.

No registry is reachable, so the image is made from this machine's own files
and ``docker import``-ed (``APIClient.import_image``): the system Python 3.11
and its standard library, the few packages a worker host needs (psycopg and
its bundled libpq, psutil, PyYAML), the suite's source (``backends``,
``chaos``, ``checkers``, ``workloads``), the PostgreSQL server binaries with
their share files, ``/bin/sh`` (initdb runs the server through it), the
shared libraries all of these load (their ``ldd`` closure), the time zone data
and a ``/etc/passwd`` with ``postgres``. The tag carries a hash of every file's
path, size and mtime, so an unchanged machine reuses the image.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = "claim-chaos-node"
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backends", "chaos", "checkers", "workloads")
SITE_PACKAGES = ("psycopg", "psycopg_binary", "psycopg_binary.libs", "psutil", "yaml", "_yaml", "typing_extensions.py")
PYTHON = "/usr/bin/python3.11"
#: where things go inside the image
SRC, SITE = "/opt/chaos/src", "/opt/chaos/site"
POSTGRES_UID, POSTGRES_GID = 999, 999


def pg_bindir() -> str:
    from chaos.faults.pgserver import find_bindir

    d = find_bindir()
    if d is None:
        raise RuntimeError("no PostgreSQL server binaries here to put in the node image")
    return str(d)


def _site_dir() -> Path:
    import psutil

    return Path(psutil.__file__).resolve().parents[1]


def _ldd(paths: list[str]) -> set[str]:
    libs: set[str] = set()
    for p in paths:
        try:
            out = subprocess.run(["ldd", p], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for m in re.finditer(r"(/\S+\.so[^\s]*)", out):
            libs.add(m.group(1))
    return libs


def _elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def file_list() -> list[tuple[str, str]]:
    """(host path, path in the image) of every file of the node image."""
    files: list[tuple[str, str]] = []

    def tree(host: str, inside: str, skip=lambda p: False) -> None:
        for d, dirs, names in os.walk(host):
            dirs[:] = [x for x in dirs if x != "__pycache__" and not skip(os.path.join(d, x))]
            for n in names:
                p = os.path.join(d, n)
                if not skip(p):
                    files.append((p, os.path.join(inside, os.path.relpath(p, host))))

    pylib = "/usr/lib/python3.11"
    tree(pylib, pylib, skip=lambda p: p.startswith((f"{pylib}/test", f"{pylib}/idlelib", f"{pylib}/tkinter",
                                                    f"{pylib}/ensurepip", f"{pylib}/lib2to3")))
    files.append((PYTHON, PYTHON))
    site = _site_dir()
    for name in SITE_PACKAGES:
        p = site / name
        if p.is_dir():
            tree(str(p), f"{SITE}/{name}")
        elif p.exists():
            files.append((str(p), f"{SITE}/{name}"))
    for pkg in PACKAGES:
        tree(str(ROOT / pkg), f"{SRC}/{pkg}", skip=lambda p: p.endswith((".so", ".o")) and "/linearizable/" in p)
    bindir = pg_bindir()
    pgroot = str(Path(bindir).parent)
    tree(pgroot, pgroot)
    share = f"/usr/share/postgresql/{Path(pgroot).name}"
    if os.path.isdir(share):
        tree(share, share)
    if os.path.isdir("/usr/share/zoneinfo"):
        tree("/usr/share/zoneinfo", "/usr/share/zoneinfo")
    sh = os.path.realpath("/bin/sh")
    files.append((sh, "/bin/sh"))
    elves = [h for h, _ in files if _elf(h)]
    for lib in sorted(_ldd(elves)):
        if os.path.normpath(lib).startswith(str(site)):   # wheel-bundled libraries travel with their package
            continue
        files.append((lib, lib))
        real = os.path.realpath(lib)
        if real != lib:
            files.append((real, real))
    for lib in ("/lib64/ld-linux-x86-64.so.2",):
        if os.path.exists(lib):
            files.append((os.path.realpath(lib), lib))
    seen, out = set(), []
    for h, i in files:
        i = os.path.normpath(i)
        if i not in seen:
            seen.add(i)
            out.append((h, i))
    return out


def tag(files: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for host, inside in files:
        st = os.stat(host)
        h.update(f"{inside}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _add_text(tar: tarfile.TarFile, path: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(path.lstrip("/"))
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, path: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(path.lstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def build_tar(files: list[tuple[str, str]], out: str) -> None:
    with tarfile.open(out, "w", dereference=True) as tar:   # symlinked libraries become files
        for d in ("/tmp", "/srv", "/var/run/postgresql", "/home/postgres"):
            _add_dir(tar, d, 0o1777 if d == "/tmp" else 0o755)
        _add_text(tar, "/etc/passwd", f"root:x:0:0:root:/root:/bin/sh\n"
                                      f"postgres:x:{POSTGRES_UID}:{POSTGRES_GID}:postgres:/home/postgres:/bin/sh\n")
        _add_text(tar, "/etc/group", f"root:x:0:\npostgres:x:{POSTGRES_GID}:\n")
        for host, inside in files:
            tar.add(host, arcname=inside.lstrip("/"), recursive=False)
        link = tarfile.TarInfo("usr/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, "python3.11"
        tar.addfile(link)


def ensure_image(client, log=lambda msg: print(msg, file=sys.stderr)) -> str:
    """The node image's name in ``client``'s daemon, importing it when missing."""
    files = file_list()
    name = f"{REPO}:{tag(files)}"
    try:
        client.images.get(name)
        return name
    except Exception:   # docker.errors.ImageNotFound: build it
        pass
    log(f"chaos: building node image {name} from {len(files)} local files (no registry is used)")
    with tempfile.TemporaryDirectory(prefix="chaos-node-") as d:
        tar = os.path.join(d, "rootfs.tar")
        build_tar(files, tar)
        repo, _, t = name.partition(":")
        client.api.import_image(src=tar, repository=repo, tag=t)
    client.images.get(name)
    return name
