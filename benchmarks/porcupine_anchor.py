"""Our linearizability checker vs Porcupine (Go), side by side in ONE invocation.

This script builds Porcupine's own timing harness (``../shared/anchors/porcupine/go``:
upstream source plus ``anchorbench_test.go``), runs it, then runs our checker
on the same anchor files, and prints ratios from this run only (no stored
timings). How the two are measured, the same way on both sides:

* one process each, one check at a time; Go with ``GOMAXPROCS`` = 1 by
  default (``--gomaxprocs``), so neither side gets a second core: Porcupine
  runs partitions in goroutines, and with two cores its CPU time still counts
  both, but its early cancel of a failing kv history then differs;
* what is timed is the check alone: Go's ``CheckEvents(model, events)`` and
  our ``check_operations(model, ops)``, each including its partitioning and
  entry building, parsing excluded on both sides;
* per file: 1 untimed warm-up, then 3 trials, each repeating the check until
  >= 20 ms have passed; per-check wall and CPU (user+sys of the process:
  ``getrusage`` in Go, ``time.process_time`` here); the median of the 3.

A family's figure is the sum of its files' medians. Ours is measured with the
symmetry reduction off (Porcupine's search order, step for step; the "Done
when" figure) and on (our default), and once more off with the anchor models'
``effect`` shortcut removed ("step only": every transition through the
model's Python ``step``, as a model without the shortcut, e.g. the claim
model, runs). Verdicts must match Go's and the expected ones (exit 1
otherwise). Without Go on PATH it says so and prints ours only.

    .venv/bin/python benchmarks/porcupine_anchor.py [--files] [--gomaxprocs N] [--skip-nopart]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from checkers.linearizable import check_operations  # noqa: E402
from checkers.linearizable.anchors import (  # noqa: E402
    etcd_model, kv_model, kv_no_partition_model, parse_etcd_log, parse_kv_log,
)
from checkers.linearizable.checker import _engine  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANCHORS = os.environ.get("PORCUPINE_ANCHORS", os.path.join(HERE, "..", "shared", "anchors", "porcupine"))
HEAVY = ("002", "007", "099", "057", "075")
ETCD, KV, NOPART = "etcd register", "kv by key", "kv map, no partition"


# --------------------------------------------------------------------------- the Go side


def run_go(gomaxprocs: int, skip_nopart: bool) -> tuple[dict, str]:
    """Build and run Porcupine's harness; ({(file, model): (verdict, wall ms, cpu ms)}, header)."""
    src = os.path.join(ANCHORS, "go")
    with tempfile.TemporaryDirectory(prefix="porcupine-") as d:
        shutil.copytree(src, d, dirs_exist_ok=True)
        os.symlink(os.path.abspath(os.path.join(ANCHORS, "test_data")), os.path.join(d, "test_data"))
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOCACHE": os.path.join(d, ".gocache"),
               "GOMAXPROCS": str(gomaxprocs)}
        if skip_nopart:
            env["ANCHOR_SKIP_NOPART"] = "1"
        subprocess.run(["go", "test", "-c", "-o", "anchorbench.test", "."], cwd=d, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        out = subprocess.run(["./anchorbench.test", "-test.run", "TestAnchorBench", "-test.count", "1"],
                             cwd=d, env=env, check=True, capture_output=True, text=True).stdout
    rows, header = {}, ""
    for line in out.splitlines():
        if line.startswith("#GOMAXPROCS"):
            header = line.lstrip("#")
        parts = line.split("\t")
        if len(parts) == 7 and parts[0] != "file":
            rows[(parts[0], parts[1])] = (parts[2] == "yes", float(parts[3]), float(parts[6]))
    return rows, header


# --------------------------------------------------------------------------- our side


def measure(fn) -> tuple[float, float, bool]:
    """(wall ms, CPU ms, linearizable?) per check: Go's harness rule, 1 warm-up + 3 trials of >= 20 ms."""
    verdict = fn()
    walls, cpus = [], []
    for _ in range(3):
        reps, w0, c0 = 0, time.perf_counter(), time.process_time()
        while True:
            verdict = fn()
            reps += 1
            if time.perf_counter() - w0 >= 0.02:
                break
        walls.append((time.perf_counter() - w0) * 1e3 / reps)
        cpus.append((time.process_time() - c0) * 1e3 / reps)
    return statistics.median(walls), statistics.median(cpus), verdict


def anchor_jobs(skip_nopart: bool) -> list[tuple[str, str, object, list]]:
    """(file, model name, model, ops) in the Go harness's order, parsed once (not timed)."""
    jobs = []
    for i in range(103):
        if i == 95:  # empty upstream
            continue
        f = f"jepsen/etcd_{i:03d}.log"
        jobs.append((f, ETCD, etcd_model, parse_etcd_log(os.path.join(ANCHORS, "test_data", f))))
    for name in ("c01-ok", "c01-bad", "c10-ok", "c10-bad", "c50-ok", "c50-bad"):
        f = f"kv/{name}.txt"
        jobs.append((f, KV, kv_model, parse_kv_log(os.path.join(ANCHORS, "test_data", f))))
    for name in ("c01-ok", "c01-bad") + (() if skip_nopart else ("c10-ok", "c10-bad")):
        f = f"kv/{name}.txt"
        ops = parse_kv_log(os.path.join(ANCHORS, "test_data", f))
        jobs.append((f, NOPART, kv_no_partition_model(ops), ops))
    return jobs


def families(file: str, model: str) -> list[str]:
    if model == ETCD:
        heavy = ["etcd heavy 002/007/099/057/075"] if any(file.endswith(f"_{h}.log") for h in HEAVY) else []
        return ["etcd all 102"] + heavy
    name = file.split("/")[1].removesuffix(".txt")
    return [f"kv {name} " + ("partitioned" if model == KV else "no partition")]


# --------------------------------------------------------------------------- the table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", action="store_true", help="also print one row per file")
    ap.add_argument("--gomaxprocs", type=int, default=1, help="GOMAXPROCS for the Go harness (default 1)")
    ap.add_argument("--skip-nopart", action="store_true", help="skip the slow no-partition kv c10 rows")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(ANCHORS, "test_data")):
        print(f"no Porcupine anchors at {ANCHORS} (set PORCUPINE_ANCHORS)", file=sys.stderr)
        return 254
    engine = _engine("auto")
    print(f"ours: Python {platform.python_version()}, engine {engine}, single thread; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    go_rows: dict = {}
    if shutil.which("go") is None:
        print("Go is not installed (apt-get install golang-go): printing our figures only, no ratios")
    elif not os.path.isdir(os.path.join(ANCHORS, "go")):
        print(f"no Porcupine Go source at {ANCHORS}/go: printing our figures only, no ratios")
    else:
        go_rows, header = run_go(args.gomaxprocs, args.skip_nopart)
        print(f"go:   {header}, harness {ANCHORS}/go/anchorbench_test.go, {len(go_rows)} rows; "
              f"load average {os.getloadavg()[0]:.2f}")
    fam: dict[str, list[float]] = {}
    mismatches = []
    expected = {}
    with open(os.path.join(ANCHORS, "timings.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            expected[(r["file"], r["model"])] = r["expected"] == "yes"
    if args.files:
        print(f"\n{'file':<22}{'model':<22}{'go cpu':>9}{'ours off':>10}{'ratio':>7}{'ours on':>9}{'ratio':>7}"
              f"{'step only':>10}{'ratio':>7}  verdict")
    for file, model_name, model, ops in anchor_jobs(args.skip_nopart):
        figures = {}
        for sym in (False, True):
            figures[sym] = measure(lambda: check_operations(model, ops, symmetry=sym).ok)
        plain = replace(model, effect=None)
        figures["step"] = measure(lambda: check_operations(plain, ops, symmetry=False).ok)
        go = go_rows.get((file, model_name))
        verdicts = {f[2] for f in figures.values()} | ({go[0]} if go else set())
        want = expected.get((file, model_name))
        if len(verdicts) != 1 or (want is not None and verdicts != {want}):
            mismatches.append(f"{file} [{model_name}]: ours off={figures[False][2]} on={figures[True][2]} "
                              f"step-only={figures['step'][2]} go={go[0] if go else '-'} expected={want}")
        for k in families(file, model_name):
            acc = fam.setdefault(k, [0.0] * 6)
            acc[0] += go[2] if go else 0.0
            acc[1] += figures[False][1]
            acc[2] += figures[True][1]
            acc[3] += figures["step"][1]
            acc[4] += go[1] if go else 0.0
            acc[5] += figures[False][0]
        if args.files:
            gc = go[2] if go else None
            print(f"{file:<22}{model_name[:21]:<22}{_ms(gc):>9}{_ms(figures[False][1]):>10}"
                  f"{_ratio(figures[False][1], gc):>7}{_ms(figures[True][1]):>9}{_ratio(figures[True][1], gc):>7}"
                  f"{_ms(figures['step'][1]):>10}{_ratio(figures['step'][1], gc):>7}"
                  f"  {'linearizable' if figures[False][2] else 'not linearizable'}")
    print(f"\nCPU ms per family (sum of per-file medians); ratio = ours / Go; off/on = symmetry reduction "
          f"(off = Porcupine's search order); step only = off, no effect shortcut; wall = off; "
          f"load average now {os.getloadavg()[0]:.2f}")
    print(f"{'family':<32}{'go cpu':>9}{'ours off':>10}{'ratio':>7}{'ours on':>9}{'ratio':>7}"
          f"{'step only':>10}{'ratio':>7}{'go wall':>9}{'ours wall':>10}")
    for k, (gc, off, on, step, gw, ow) in fam.items():
        gc_ = gc if go_rows else None
        print(f"{k:<32}{_ms(gc_):>9}{_ms(off):>10}{_ratio(off, gc_):>7}{_ms(on):>9}{_ratio(on, gc_):>7}"
              f"{_ms(step):>10}{_ratio(step, gc_):>7}{_ms(gw if go_rows else None):>9}{_ms(ow):>10}")
    print(f"\nverdict mismatches: {len(mismatches)}")
    for m in mismatches:
        print("  " + m)
    return 1 if mismatches else 0


def _ms(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def _ratio(ours: float, go: float | None) -> str:
    return "-" if not go else f"{ours / go:.2f}"


if __name__ == "__main__":
    sys.exit(main())
