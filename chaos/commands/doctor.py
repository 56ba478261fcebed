"""``chaos doctor``: which fault mechanisms work on this machine, and how to get
the missing ones, and per backend which nemeses ``chaos run`` can use here.

``chaos doctor --backend NAME [--profile FILE | --dsn DSN | --factory M:F]``
prints that backend's capability matrix instead: one line per ability
(``chaos.sut.abilities``) saying how it is done or why it cannot be, then the
nemeses with what each hits.

``--nemesis LIST`` (the names ``chaos run --nemesis`` takes) asks for those
faults with ``--backend`` (default sqlite, as ``chaos run``): doctor exits 3
when any of them cannot be used here, so a CI job can stop before a run that
would end ``unknown`` ("a requested fault never took effect"). Without it
doctor only reports and exits 0; a bad argument exits 254."""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys


#: the exit code of a doctor run missing a mechanism that ``--nemesis`` asked for
MISSING_EXIT = 3

EXIT_CODES = """exit codes:
  0    done (with --nemesis: every requested fault can be used here)
  3    --nemesis: a requested fault cannot be used here (each one named, with what is missing)
  254  bad arguments: one line on stderr
  255  the suite itself crashed: a traceback on stderr (please report it)"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--backend", default=None, help="print this backend's capability matrix")
    p.add_argument("--profile", default=None, help="external: the profile whose abilities to show")
    p.add_argument("--command", dest="backend_command", default=None,
                   help="external: the contract CLI (doctor asks it, on a scratch ledger, whether it has the commands "
                        "and capabilities its profile says)")
    p.add_argument("--dsn", default=None, help="postgres: the user's server (server faults are then off)")
    p.add_argument("--factory", default=None, help="python: the backend factory MODULE:FUNCTION")
    p.add_argument("--nemesis", default=None,
                   help="comma-separated faults a run will need (kill,pause,clock,fsync,lost-reply,restart): exit 3 "
                        "when any cannot be used with --backend (default sqlite) here")


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
    out.append(("gcc (builds the fsync and write-release shims)", bool(gcc), gcc or "not found", "apt-get install -y gcc"))
    try:
        from chaos.faults.failsync import build

        out.append(("fsync shim (fsync faults)", True, build(), "needs gcc"))
    except Exception as e:
        out.append(("fsync shim (fsync faults)", False, f"{type(e).__name__}: {e}", "apt-get install -y gcc"))
    try:
        from chaos.faults.lockfreeze import build as build_lockfreeze

        out.append(("write-release shim (frozen-publish episode)", True, build_lockfreeze(), "needs gcc"))
    except Exception as e:
        out.append(("write-release shim (frozen-publish episode)", False, f"{type(e).__name__}: {e}",
                    "apt-get install -y gcc"))
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
    from backends.external import confine

    out.append(("Landlock (external programs write only in the run directory)", *confine.status(),
                "Linux >= 5.13 with landlock in the lsm= boot list"))
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    out.append(("chromium (report screenshots)", bool(chrome), chrome or "not found", "apt-get install -y chromium"))
    return out


def nemesis_matrix() -> dict:
    """backend -> nemesis -> {"ok", "detail"} for ``chaos run`` here."""
    from chaos import sut
    from chaos.nemesis import support

    return {name: {n: {"ok": ok, "detail": detail} for n, (ok, detail) in support(name).items()}
            for name in sut.names(runs=True)}


def backend_matrix(args) -> dict:
    """One backend's abilities and nemeses (``--backend``)."""
    from chaos import sut
    from chaos.nemesis import support

    backend = sut.get(args.backend)
    opts = {"dsn": args.dsn, "command": args.backend_command, "profile": args.profile, "factory": args.factory}
    if args.profile and not os.path.isfile(args.profile):
        from chaos.errors import UsageError

        raise UsageError(f"--profile {args.profile}: no such file")
    nemeses = support(backend.name, opts) if backend.runs else {}
    abilities = backend.abilities(opts).to_json()
    # external --command: the profile against what the program itself answers (not only what it declares)
    mismatches = backend.probe(opts) if hasattr(backend, "probe") else {}
    for member, line in mismatches.items():
        ability = getattr(backend, "ABILITY_OF_MEMBER", {}).get(member)
        if ability in abilities:
            abilities[ability] = dict(abilities[ability], ok=False, how=line)
    return {"backend": backend.name, "summary": backend.summary, "abilities": abilities,
            "nemeses": {n: {"ok": ok, "detail": d} for n, (ok, d) in nemeses.items()},
            "profile_mismatches": list(mismatches.values())}


def _print_backend(m: dict) -> None:
    print(f"{m['backend']}: {m['summary']}")
    for line in m.get("profile_mismatches") or []:
        print(f"  MISMATCH {line}")
    print("abilities:")
    for name, a in m["abilities"].items():
        print(f"  {'ok     ' if a['ok'] else 'MISSING'} {name}: {a['how']}")
    if m["nemeses"]:
        print("nemeses (chaos run --nemesis ...):")
        for name, r in m["nemeses"].items():
            print(f"  {'ok     ' if r['ok'] else 'MISSING'} {name}: {r['detail']}")


def requested_missing(args: argparse.Namespace, nemeses: dict) -> list[str]:
    """The ``--nemesis`` faults ``nemeses`` (name -> {ok, detail}) cannot do, with why."""
    from chaos.errors import UsageError

    wanted = [n.strip() for n in (args.nemesis or "").split(",") if n.strip()]
    unknown = [n for n in wanted if n not in nemeses]
    if unknown:
        raise UsageError(f"--nemesis: unknown fault(s) {', '.join(unknown)} (one of {', '.join(nemeses)})")
    return [f"{n}: {nemeses[n]['detail']}" for n in wanted if not nemeses[n]["ok"]]


def run(args: argparse.Namespace) -> int:
    if args.nemesis is not None:
        args.backend = args.backend or "sqlite"
    if args.backend is not None:
        m = backend_matrix(args)
        missing = requested_missing(args, m["nemeses"]) if args.nemesis is not None else []
        if args.json:
            import json

            print(json.dumps(dict(m, requested_missing=missing) if args.nemesis is not None else m, indent=2))
        else:
            _print_backend(m)
        for line in missing:
            print(f"chaos doctor: requested fault missing: {line}", file=sys.stderr)
        return MISSING_EXIT if missing else 0
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
