"""What one call of a per-call contract CLI costs: the black-box path of the
red team (``benchmarks/mutant_matrix.py``) starts one ``python -m chaos.cli
backend python --factory ...`` process per operation, so its run exercises
only as many operations as the machine can start processes.

Measured side by side in one run, ``--calls`` times each, interleaved:

* ``python -c pass``: the interpreter alone (the floor);
* the CLI from two copies of this checkout's packages: as sources only (what
  every call pays where ``PYTHONDONTWRITEBYTECODE`` is set and nothing was
  compiled: each import compiles its module afresh) and compiled to bytecode
  (``compileall``, what ``benchmarks/mutant_matrix.py`` does first); each a
  ``claim read`` (the common decision-free call) and an ``acquire`` +
  ``release``; ``--trees`` adds other checkouts as they are (e.g.
  ``--trees /work/main`` to compare a change with main);
* the same read in process (the engine alone, no process start).

Per call: median wall and the CPU (user + system) the children used; the
ratios to the interpreter floor.

    .venv/bin/python benchmarks/cli_call_cost.py [--calls 30] [--trees /work/main]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "wbns_" + "a" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1RA"
FACTORY = "chaos.testing.mutants:open_witness_ignored"
PACKAGES = ("backends", "chaos", "checkers", "workloads")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(argv: list[str], stdin: bytes, cwd: str) -> tuple[float, float, bytes]:
    cpu, t = _cpu(), time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd)
    wall = time.perf_counter() - t
    if p.returncode not in (0, 2, 3, 4, 5, 6):
        raise SystemExit(f"{argv}: exit {p.returncode}: {p.stderr.decode()[-500:]}")
    return wall, _cpu() - cpu, p.stdout


def cli(ledger: str, *words: str) -> list[str]:
    return [sys.executable, "-m", "chaos.cli", "backend", "python", "--factory", FACTORY, *words,
            "--ledger", ledger, "--input", "-", "--json"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--trees", default="", help="comma-separated other checkouts whose chaos.cli to time as they are")
    args = ap.parse_args(argv)
    d = tempfile.mkdtemp(prefix="chaos-cli-cost-")
    try:
        trees = {}
        for tag, compiled in (("sources only", False), ("compiled", True)):
            tree = os.path.join(d, tag.replace(" ", "-"))
            for pkg in PACKAGES:
                shutil.copytree(os.path.join(ROOT, pkg), os.path.join(tree, pkg),
                                ignore=shutil.ignore_patterns("__pycache__"))
            if compiled and not compileall.compile_dir(tree, quiet=1):
                raise SystemExit(f"{tree} does not compile")
            trees[tag] = tree
        trees.update({t: os.path.abspath(t) for t in args.trees.split(",") if t})
        ledger = os.path.join(d, "ledger")
        os.makedirs(ledger)
        subprocess.run(cli(ledger, "provision")[:-3] + ["--ledger", ledger, "--namespace", NS, "--json"],
                       check=True, capture_output=True, cwd=ROOT)
        read = json.dumps({"ledger_namespace": NS, "item_id": ITEM}).encode()
        samples: dict[str, list[tuple[float, float]]] = {}

        def note(name, wall, cpu):
            samples.setdefault(name, []).append((wall, cpu))

        for i in range(args.calls):   # interleaved, so load changes hit every variant alike
            note("python -c pass", *_timed([sys.executable, "-c", "pass"], b"", ROOT)[:2])
            for tag, tree in trees.items():
                note(f"CLI read ({tag})", *_timed(cli(ledger, "claim", "read"), read, tree)[:2])
                # an acquire whose witness is the state a read just returned, then its release
                w, c, out = _timed(cli(ledger, "claim", "read"), read, tree)
                rb = json.loads(out)["result"]["read_back"]
                acq = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": f"owner-{i}", "lease_duration_ms": 60000,
                       "expected": {"last_epoch": rb["last_epoch"], "active": rb["active"]}}
                w1, c1, out = _timed(cli(ledger, "claim", "acquire"), json.dumps(acq).encode(), tree)
                reply = json.loads(out)
                if not reply.get("ok"):
                    raise SystemExit(f"acquire refused: {out[:400]!r}")
                a = reply["result"]["claim"]
                rel = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": a["owner_id"], "epoch": a["epoch"],
                       "expected_expires_at": a["expires_at"]}
                w2, c2, out = _timed(cli(ledger, "claim", "release"), json.dumps(rel).encode(), tree)
                if not json.loads(out).get("ok"):
                    raise SystemExit(f"release refused: {out[:400]!r}")
                note(f"CLI acquire+release ({tag})", w1 + w2, c1 + c2)
        from backends.api import SystemClock
        from chaos.commands.backend import EnvBarrierHooks
        from chaos.testing.mutants import open_witness_ignored

        b = open_witness_ignored({"backend": "python", "path": os.path.join(ledger, "claims.db")}, SystemClock(),
                                 EnvBarrierHooks())
        for _ in range(args.calls):
            t = time.perf_counter()
            b.call("read", read)
            note("engine read in process", time.perf_counter() - t, 0.0)   # (CPU not separable here)
        b.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    floor = statistics.median(c for _, c in samples["python -c pass"])
    print(f"{args.calls} calls each, interleaved; load average {os.getloadavg()[0]:.2f}")
    print(f"{'variant':<44} {'wall ms':>8} {'cpu ms':>8} {'cpu / floor':>11}")
    for name, s in samples.items():
        wall = statistics.median(w for w, _ in s) * 1000
        cpu = statistics.median(c for _, c in s)
        ratio = f"{cpu / floor:.1f}x" if cpu and floor else "-"
        print(f"{name:<44} {wall:>8.2f} {cpu * 1000:>8.1f} {ratio:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
