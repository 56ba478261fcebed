"""Scale of ``chaos check``: realistic histories of 100k, 300k and 1M ops
(``benchmarks/history_gen.py``), wall time, CPU and peak RSS, whole and per
checker, and whether the cost grows linearly.

    python benchmarks/check_scale.py [--sizes 100k,300k,1m] [--dir /tmp/claim-chaos-scale]
        [--per-checker 100k,300k,1m] [--jobs 2] [--hard [--plant]] [--against CHECKOUT]

``--hard``: the histories of ``benchmarks/hard_history.py`` instead (a
long run on a few busy items: many overlapping ops per item, ~10 % info
ops, restarts, the clock moving both ways); ``--plant`` forges one takeover
into each, so the checker must find it. Each ``chaos check`` row says how
many of the linearizability checker's partitions it decided (``ok`` or
``illegal``, not ``unknown``) and the configurations of the largest.
``--against CHECKOUT``: each ``chaos check`` row is measured in that other
checkout too, right before this one's (before / after a change, side by side
in one run: the same load for both).

Every figure is measured in a fresh subprocess, so each process's peak RSS
is its own (``VmHWM``; CPU is ``os.wait4``'s user + system, including
the helper process of ``--jobs 2``, which ``chaos check`` reaps):

* ``chaos check`` itself (the Done-when figure; ``--jobs 2`` is its default):
  the peak RSS of its own process (``VmHWM`` sampled from /proc, ``wait4``'s
  ``ru_maxrss`` only if no sample was taken), of each of its two
  processes (the checking process and the read's helper process, which
  ``chaos check`` reaps), and the peak summed PSS of both (sampled from
  /proc: shared library pages counted once);
* ``read``: ``History.read`` alone (the one pass over the file);
* one row per checker: ``chaos check --only NAME --jobs 1``, i.e. read plus
  that checker, with the checker's own CPU as it measured it in-process
  (``stats.cpu_seconds``) and the peak RSS it adds over ``read``.

Linearity: CPU per op at each size against the smallest size (1.00 =
linear). The machine's load average is printed before and after: on a
shared machine, wall time is what the others left us; CPU is the cost.
Generated histories are cached under ``--dir`` (keyed by size and seed).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.hard_history import generate_hard  # noqa: E402
from benchmarks.history_gen import GenConfig, generate  # noqa: E402
from checkers import default_checkers  # noqa: E402

SIZES = {"100k": 100_000, "200k": 200_000, "300k": 300_000, "1m": 1_000_000}
DEFAULT_JOBS = min(2, os.cpu_count() or 1)  # chaos check's own default (chaos/commands/check.py)
READ_ONLY = "import sys; from checkers.history import History; h = History.read(sys.argv[1]); print(len(h.ops))"


def measured(argv: list[str], root: str = ROOT) -> dict:
    """Run ``argv`` in the checkout ``root``: its wall time, CPU (user + system,
    its reaped children included) and peak RSS, from ``os.wait4`` of exactly this child."""
    t = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root, env=env)
    sampler = PssSampler(p.pid)
    # read both pipes to EOF before waiting, so a large output cannot block the child
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, "out")
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    chunks = {"out": [], "err": []}
    while sel.get_map():
        for key, _ in sel.select():
            data = key.fileobj.read1(65536)
            if not data:
                sel.unregister(key.fileobj)
            else:
                chunks[key.data].append(data)
    sampler.stop()
    hwm = max(sampler.hwm_kb, sampler.hwm_now_kb())  # once more at EOF (a zombie has no VmHWM left)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    out, err = b"".join(chunks["out"]), b"".join(chunks["err"])
    return {"wall": time.perf_counter() - t, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": (hwm or usage.ru_maxrss) / 1024,
            "pss_mb": sampler.peak_kb / 1024,
            "out": out.decode(), "err": err.decode()[-400:], "rc": p.returncode}


class PssSampler:
    """Peak of the summed proportional set size (``Pss``, /proc/PID/smaps_rollup)
    of a process and its children, sampled every 0.2 s: memory of a process
    tree that shares pages copy-on-write, each shared page counted once. And
    the process's own peak RSS (``VmHWM``, /proc/PID/status): ``wait4``'s
    ``ru_maxrss`` carries the parent's over exec, so a big parent inflates it."""

    def __init__(self, pid: int):
        self.pid, self.peak_kb, self.hwm_kb, self._stop = pid, 0, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pss_kb(self, pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                kb = next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
            kids = []
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    kids += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            return 0
        return kb + sum(self._pss_kb(k) for k in kids)

    def hwm_now_kb(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
        except (OSError, ValueError):
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, self._pss_kb(self.pid))
            self.hwm_kb = max(self.hwm_kb, self.hwm_now_kb())
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def history(size: str, seed: int, root: str, kind: str = "") -> tuple[str, dict]:
    d = os.path.join(root, f"{size}-seed{seed}{'-' + kind if kind else ''}")
    meta = os.path.join(d, "generated.json")
    if not os.path.exists(meta):
        if kind:
            info = generate_hard(SIZES[size], seed, d, planted=kind == "hard-planted")
        else:
            info = generate(GenConfig(ops=SIZES[size], seed=seed), d)
        with open(meta, "w") as f:
            json.dump(info, f)
    with open(meta) as f:
        return d, json.load(f)


def decided(result: dict) -> str:
    """How many linearizability partitions were decided, and the largest one's search."""
    lin = (result.get("checkers") or {}).get("linearizable")
    if not lin or "partitions" not in lin:
        return "linearizable not run"
    parts = lin["partitions"]
    done = sum(p["result"] in ("ok", "illegal") for p in parts)
    big = max(parts, key=lambda p: p["ops"], default=None)
    return (f"partitions decided {done}/{len(parts)}" + (f" (largest: {big['ops']} ops, {big['result']}, "
            f"{big['configurations']:,} configurations, {big.get('windows', 1)} windows)" if big else ""))


def row(name: str, m: dict, ops: int, extra: str = "") -> str:
    return (f"  {name:<40} {m['wall']:8.1f} s {m['cpu']:8.1f} s {m['rss_mb']:9.0f} MB "
            f"{m['cpu'] / ops * 1e6:8.1f} us/op  {extra}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100k,300k,1m")
    ap.add_argument("--per-checker", default="100k,300k,1m", help="sizes to measure each checker at ('' = none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", default="2,1", help="chaos check --jobs values to measure (2 is its default)")
    ap.add_argument("--dir", default="/tmp/claim-chaos-scale")
    ap.add_argument("--hard", action="store_true", help="busy-item histories (benchmarks/hard_history.py)")
    ap.add_argument("--plant", action="store_true", help="with --hard: one forged takeover in each history")
    ap.add_argument("--against", metavar="CHECKOUT", help="another checkout of this repository (say the code "
                    "before a change, from git archive; its C extension built): each chaos check row is "
                    "measured there too, right before this checkout's")
    args = ap.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    args.jobs = [int(j) for j in args.jobs.split(",") if j]
    per = {s for s in args.per_checker.split(",") if s}
    py = sys.executable
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"  {'':<40} {'wall':>10} {'cpu':>10} {'peak RSS':>12} {'cpu/op':>12}")
    per_op: dict[int, dict[str, float]] = {}
    for size in sizes:
        kind = ("hard-planted" if args.plant else "hard") if args.hard else ""
        d, info = history(size, args.seed, args.dir, kind)
        ops = info["ops"]
        print(f"{size}: {ops:,} ops, {info['entries']:,} history entries, {info['bytes'] / 2**20:,.0f} MiB "
              f"(generated in {info['seconds']} s; {d})")
        for jobs, root in [(j, r) for j in args.jobs for r in ([args.against] if args.against else []) + [ROOT]]:
            whole = measured([py, "-m", "chaos.cli", "check", d, "--json", "--jobs", str(jobs)], root)
            procs = {}
            try:
                result = json.loads(whole["out"])
                procs = result.get("processes") or {}
                verdict = {True: "valid", False: "INVALID"}.get(result["valid"], "unknown") + "; " + decided(result)
            except ValueError:
                verdict = f"crashed (rc {whole['rc']}): {whole['err']}"
            split = f"peak PSS {whole['pss_mb']:.0f} MB"
            if procs:
                parent, helper = procs["parent_max_rss_kb"] / 1024, procs["helper"]["max_rss_kb"] / 1024
                split = (f"peak RSS per process {parent:.0f} + {helper:.0f} = {parent + helper:.0f} MB (helper cpu "
                         f"{procs['helper']['cpu_s']:.1f} s); peak PSS of both {whole['pss_mb']:.0f} MB")
            label = f"chaos check --jobs {jobs}" + (" (default)" if jobs == DEFAULT_JOBS else "")
            if args.against:
                label = ("before: " if root == args.against else "after:  ") + label
            print(row(label, whole, ops, f"{verdict}; {split}"), flush=True)
            if root == ROOT:
                per_op.setdefault(jobs, {})[size] = whole["cpu"] / ops
        if size not in per:
            continue
        read = measured([py, "-c", READ_ONLY, os.path.join(d, "history.jsonl")])
        print(row("read (History.read)", read, ops), flush=True)
        for name in default_checkers():
            m = measured([py, "-m", "chaos.cli", "check", d, "--only", name, "--jobs", "1", "--json"])
            try:
                r = json.loads(m["out"])["checkers"][name]
                own = f"own {r['stats']['cpu_seconds']:6.2f} s cpu  {r['valid']}"
            except (ValueError, KeyError):
                own = f"rc {m['rc']}: {m['err'][-120:]}"
            print(row(name, m, ops, f"{own}  +rss {m['rss_mb'] - read['rss_mb']:5.0f} MB over read"), flush=True)
    base = sizes[0]
    for jobs, costs in per_op.items():
        print(f"linearity (chaos check --jobs {jobs}: CPU per op, against {base}): "
              + ", ".join(f"{s} {costs[s] / costs[base]:.2f}" for s in sizes))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
