"""``chaos doctor``: which fault mechanisms work on this machine, and how to get
the missing ones, and per backend which nemeses ``chaos run`` can use here.
Always exits 0 (it reports; it does not judge)."""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def _faketime_live() -> tuple[bool, str]:
    """Start a child with libfaketime preloaded and a -1 h timestamp file; its clock must move."""
    import tempfile

    from chaos.faults.faketime import ClockFault

    d = tempfile.mkdtemp(prefix="chaos-doctor-")
    try:
        fault = ClockFault(os.path.join(d, "clock"))
        fault.set_offset(-3600)
        code = "import time; print(int(time.time()))"
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **fault.env()},
                             capture_output=True, text=True, timeout=20)
        import time

        delta = int(out.stdout.strip()) - int(time.time())
        return abs(delta + 3600) < 60, f"child clock moved {delta} s (want -3600) with {fault.library}"
    except Exception as e:
        return False, f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def findings() -> list[tuple[str, bool, str, str]]:
    """(mechanism, works, detail, how to get it)."""
    out = []
    gcc = shutil.which("gcc")
    out.append(("gcc (builds the fsync shim)", bool(gcc), gcc or "not found", "apt-get install -y gcc"))
    try:
        from chaos.faults.failsync import build

        out.append(("fsync shim (fsync faults)", True, build(), "needs gcc"))
    except Exception as e:
        out.append(("fsync shim (fsync faults)", False, f"{type(e).__name__}: {e}", "apt-get install -y gcc"))
    ok, detail = _faketime_live()
    out.append(("libfaketime (clock faults, live check)", ok, detail, "pip install libfaketime==3.0.1"))
    root = os.geteuid() == 0
    out.append(("root", root, f"euid {os.geteuid()}", "run as root for the cgroup freezer"))
    freezer = os.path.isdir("/sys/fs/cgroup/freezer") and root
    out.append(("cgroup v1 freezer (pause a whole tree)", freezer, "/sys/fs/cgroup/freezer",
                "root + cgroup v1 freezer; otherwise SIGSTOP is used"))
    pg = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres")) or ([shutil.which("postgres")] if shutil.which("postgres") else [])
    out.append(("postgres binaries (--backend postgres)", bool(pg), pg[-1] if pg else "not found",
                "apt-get install -y postgresql"))
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    out.append(("chromium (report screenshots)", bool(chrome), chrome or "not found", "apt-get install -y chromium"))
    return out


def nemesis_matrix() -> dict:
    """backend -> nemesis -> {"ok", "detail"} for ``chaos run`` here. PostgreSQL
    nemeses that hit the server need our own server (binaries present)."""
    from chaos.faults.pgserver import find_bindir
    from chaos.nemesis import OWN_SERVER, support
    from chaos.targets import BACKENDS

    out: dict = {}
    for backend in BACKENDS:
        rows = support(backend)
        if backend == "postgres" and find_bindir() is None:
            for name in OWN_SERVER["postgres"]:
                rows[name] = (False, "no PostgreSQL binaries: only with --dsn, and then never on the server")
        out[backend] = {name: {"ok": ok, "detail": detail} for name, (ok, detail) in rows.items()}
    return out


def run(args: argparse.Namespace) -> int:
    rows = findings()
    try:
        matrix = nemesis_matrix()
    except Exception as e:
        matrix = {"error": f"{type(e).__name__}: {e}"}
    if args.json:
        import json

        print(json.dumps({"mechanisms": [{"mechanism": m, "ok": ok, "detail": d, "fix": fix} for m, ok, d, fix in rows],
                          "nemeses": matrix}, indent=2))
        return 0
    for mech, ok, detail, fix in rows:
        print(f"{'ok     ' if ok else 'MISSING'} {mech}: {detail}" + ("" if ok else f"\n        -> {fix}"))
    if "error" in matrix:
        print(f"nemesis registry unavailable: {matrix['error']}")
        return 0
    print("\nnemeses per backend (chaos run --backend B --nemesis ...):")
    for backend, table in matrix.items():
        works = [n for n, r in table.items() if r["ok"]]
        print(f"  {backend}: {', '.join(works) or 'none'}")
        for name, r in table.items():
            print(f"    {'ok     ' if r['ok'] else 'MISSING'} {name}: {r['detail']}")
    return 0
