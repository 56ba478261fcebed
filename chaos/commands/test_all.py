"""``chaos test-all --matrix FILE.yaml``: run every combination of a test matrix.

A matrix file (see ``matrices/smoke.yaml``, ``matrices/nightly.yaml``)::

    name: smoke                  # prefix of each run's test name
    workload: claims             # or workloads: [claims, ...]
    backends: [sqlite]           # names, or {backend: python, factory: "mod:fn"} entries
    nemeses: [[], [kill], [pause, clock]]   # each entry is ONE run's set ("none" / [] = no faults)
    seeds: [1, 2]
    time_limit: 5                # seconds of workload per run
    workers: 3
    store: store                 # optional; --store wins

    deterministic: true          # optional: true, every run --deterministic; false, --timed;
                                 # absent, chaos run's default (deterministic where it can run)
    reports: true                # optional: false skips each run's report.html (big campaigns)

By default runs are sequential (one at a time keeps a shared machine usable
and the timings honest). ``--workers N`` fans them out over a Dask
``LocalCluster`` of N worker processes, ``--scheduler tcp://HOST:PORT`` over a
running Dask cluster (``chaos.campaign.fanout``); ``--shard i/n`` keeps
combinations i, i+n, ... for a CI system that runs its own matrix. Each
combination runs through ``run_one``, which executes ``chaos run`` in a
subprocess (a crash of one run cannot take the matrix down) and reads the run
directory it wrote. The command prints one table row per run as it finishes
(backend, nemeses, seed, verdict, ops, duration, run dir), streams every run
into a campaign report (``chaos.campaign.report``: STORE/campaigns/...), writes
a matrix JUnit file and exits with the worst result (``chaos.errors.worst``:
crash > usage > invalid > unknown > valid).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from backends import safeload
from chaos.campaign.fanout import check_scheduler_address, fan_out, parse_shard, shard_of
from chaos.campaign.report import CampaignReport, SeedRecord, findings_of, utc_now
from chaos.commands.run import MAX_SECONDS
from chaos.errors import ExitCode, UsageError, sigterm_as_ctrl_c, worst
from chaos.store import check_name, writable_dir

MATRIX_KEYS = {"name", "workload", "workloads", "backends", "nemeses", "seeds", "time_limit", "workers", "store",
               "deterministic", "reports"}


@dataclass
class RunRequest:
    """One chaos run, as plain data (the flags of ``chaos run``)."""

    backend: str = "sqlite"
    workload: str = "claims"
    nemesis: list = field(default_factory=list)
    seed: int = 1
    time_limit: float = 5.0
    workers: int | None = 3           # None: the run's own default (10, fewer for a process-per-call program)
    store: str = "store"
    name: str | None = None
    factory: str | None = None        # for backend "python": "module:function"
    extra_args: list = field(default_factory=list)

    def argv(self) -> list[str]:
        args = ["run", "--backend", self.backend, "--workload", self.workload,
                "--nemesis", ",".join(self.nemesis) if self.nemesis else "none",
                "--seed", str(self.seed), "--time-limit", f"{self.time_limit:g}", "--store", self.store]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        if self.name:
            args += ["--name", self.name]
        if self.factory:
            args[args.index("--backend") + 1] = "python"
            args += ["--factory", self.factory]
        return args + list(self.extra_args)


@dataclass
class RunOutcome:
    request: RunRequest
    exit_code: int
    run_dir: str | None
    results: dict
    wall_s: float
    output: str = ""

    @property
    def verdict(self) -> str:
        v = self.results.get("verdict")
        if v in ("valid", "invalid", "unknown"):
            return v
        return {254: "usage-error", 255: "crashed"}.get(self.exit_code, "unknown")

    def explanations(self) -> list[str]:
        out = []
        for name, r in (self.results.get("checkers") or {}).items():
            for a in (r.get("anomalies") or []) if isinstance(r, dict) else []:
                out.append(f"[{name}] {a.get('type')} (ops {a.get('ops')}): {a.get('explanation')}")
        return out

    @property
    def command(self) -> str:
        cmd = (self.results.get("test") or {}).get("command")
        if isinstance(cmd, list):
            import shlex

            return shlex.join(str(c) for c in cmd)
        return str(cmd) if cmd else "chaos " + " ".join(self.request.argv())


def _runs_under(store: str) -> set[str]:
    out = set()
    if not os.path.isdir(store):
        return out
    for name in os.listdir(store):
        base = os.path.join(store, name)
        if name != "latest" and os.path.isdir(base) and not os.path.islink(base):
            out.update(os.path.join(base, s) for s in os.listdir(base))
    return out


def _command(req: RunRequest) -> list[str]:
    """``chaos run ...`` with this interpreter."""
    return [sys.executable, "-m", "chaos.cli", *req.argv()]


def new_run_dir(before: set[str], after: set[str], store: str, name: str | None) -> str | None:
    """The run directory of the run named ``name`` that appeared between two
    listings of ``store``: runs going on side by side in one store (the red
    team's ``--jobs``) each have their own ``<store>/<name>/`` (the newest of
    another name is another run's, and a caller that removes it destroys it)."""
    mine = sorted(d for d in after - before if name is None or os.path.dirname(d) == os.path.join(store, name))
    return mine[-1] if mine else None


def run_one(req: RunRequest, timeout: float | None = None, env: dict | None = None) -> RunOutcome:
    """Run ``chaos run`` for ``req`` in a subprocess and read back what it stored.

    The run directory is the one of ``req.name`` that appeared under the store
    during the run (not ``store/latest``, which a concurrent run may move).
    """
    store = os.path.abspath(req.store)
    req = RunRequest(**{**req.__dict__, "store": store})
    before = _runs_under(store)
    started = time.monotonic()
    timeout = timeout if timeout is not None else req.time_limit * 4 + 120
    try:
        proc = subprocess.run(_command(req), capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
        code, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:  # subprocess.run kills and reaps the child
        code, output = int(ExitCode.CRASH), f"chaos run did not finish within {timeout:.0f}s\n{e.stdout or ''}"
    wall = time.monotonic() - started
    run_dir = new_run_dir(before, _runs_under(store), store, req.name)
    results = {}
    if run_dir:
        try:
            results = safeload.json_file(os.path.join(run_dir, "results.json"), safeload.RESULTS, "results")
        except safeload.LoadError:
            results = {}
    if code not in (0, 1, 2, 254, 255):
        code = int(ExitCode.CRASH)
    return RunOutcome(req, code, run_dir, results if isinstance(results, dict) else {}, wall, output)


# ------------------------------------------------------------------ the matrix


def seeds_of(text: str) -> list[int]:
    """The benchmarks' ``--seeds`` ranges: ``"1-3,7"`` -> ``[1, 2, 3, 7]``."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def _fail(path: str, msg: str):
    raise UsageError(f"chaos test-all: {path}: {msg}")


def load_matrix(path: str) -> dict:
    try:
        data = safeload.yaml_file(path, what="matrix")
    except safeload.LoadError as e:
        raise UsageError(f"chaos test-all: {e}") from None
    if not isinstance(data, dict):
        _fail(path, "a matrix must be a mapping with backends, nemeses, seeds ...")
    unknown = sorted(set(data) - MATRIX_KEYS)
    if unknown:
        _fail(path, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(MATRIX_KEYS))}")
    return data


def expand(matrix: dict, path: str = "matrix", store: str | None = None) -> list[RunRequest]:
    """Every combination backends x workloads x nemeses x seeds, as run requests."""
    from chaos import sut

    KNOWN = sut.names(runs=True)  # what chaos run can run

    backends = _list(matrix, "backends", path)
    workloads = matrix["workloads"] if "workloads" in matrix else [matrix.get("workload", "claims")]
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, str) for w in workloads):
        _fail(path, "workloads must be a non-empty list of workload names (or workload: one name)")
    nemeses = matrix.get("nemeses", [[]])
    seeds = _list(matrix, "seeds", path)
    if not isinstance(nemeses, list) or not nemeses:
        _fail(path, "nemeses must be a non-empty list of fault sets")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        _fail(path, "seeds must be integers")
    time_limit, workers = matrix.get("time_limit", 5), matrix.get("workers", 3)
    if (not isinstance(time_limit, (int, float)) or isinstance(time_limit, bool)
            or not 0 < time_limit <= MAX_SECONDS):
        _fail(path, f"time_limit must be a number of seconds in (0, {MAX_SECONDS}]")
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 200:
        _fail(path, "workers must be an integer between 1 and 200")
    prefix = matrix.get("name", "matrix")
    check_name(prefix, f"{path}: name")
    run_flags = []
    for key, flags in (("deterministic", {True: "--deterministic", False: "--timed"}),
                       ("reports", {False: "--no-report"})):
        if key in matrix and not isinstance(matrix[key], bool):
            _fail(path, f"{key} must be true or false")
        if key in matrix and matrix[key] in flags:   # absent: chaos run's own default
            run_flags.append(flags[matrix[key]])
    if not isinstance(matrix.get("store", "store"), str):
        _fail(path, "store must be a directory path")
    known_faults = _known_faults()
    specs = []
    for b in backends:
        spec = {"backend": b} if isinstance(b, str) else b
        if not isinstance(spec, dict) or spec.get("backend") not in KNOWN:
            _fail(path, f"backend {b!r} is not one of {', '.join(KNOWN)}")
        if spec["backend"] == "python" and not isinstance(spec.get("factory"), str):
            _fail(path, 'a "python" backend needs factory: "module:function"')
        specs.append(spec)
    fault_sets = []
    for n in nemeses:
        names = _fault_set(n, path)
        bad = [x for x in names if known_faults and x not in known_faults]
        if bad:
            _fail(path, f"unknown nemesis {', '.join(bad)}; known: {', '.join(sorted(known_faults))}")
        fault_sets.append(names)
    out = []
    for spec, workload, faults, seed in itertools.product(specs, workloads, fault_sets, seeds):
        label = spec["backend"] if spec["backend"] != "python" else spec["factory"].rpartition(":")[2]
        out.append(RunRequest(backend=spec["backend"], workload=str(workload), nemesis=faults, seed=seed,
                              time_limit=float(time_limit), workers=workers,
                              store=store or str(matrix.get("store", "store")),
                              name=f"{prefix}-{label}-{'-'.join(faults) or 'none'}", factory=spec.get("factory"),
                              extra_args=list(run_flags)))
    return out


def _list(matrix: dict, key: str, path: str) -> list:
    value = matrix.get(key)
    if not isinstance(value, list) or not value:
        _fail(path, f"{key} must be a non-empty list")
    return value


def _fault_set(n, path: str) -> list[str]:
    if n in (None, "none", "", []):
        return []
    if isinstance(n, str):
        return [x.strip() for x in n.split(",") if x.strip()]
    if isinstance(n, list) and all(isinstance(x, str) for x in n):
        return list(n)
    _fail(path, f"nemeses entry {n!r} must be a list of fault names or a comma-separated string")


def _known_faults() -> set[str]:
    try:
        from chaos.nemesis import NEMESES

        return set(NEMESES.keys())
    except Exception:  # nemesis package unavailable: let `chaos run` judge the names
        return set()


# ------------------------------------------------------------------ the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", required=True, metavar="FILE.yaml", help="the matrix to run")
    parser.add_argument("--store", default=None, help="store directory (default: the matrix's store, else ./store)")
    parser.add_argument("--junit", default=None, metavar="PATH",
                        help="matrix JUnit file (default STORE/test-all-<name>-<UTC stamp>.xml)")
    parser.add_argument("--dry-run", action="store_true", help="list the combinations and exit")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="fan the runs out over a Dask LocalCluster of N worker processes on this machine "
                             "(loopback only; not the matrix's workers:, which each run's clients are); "
                             "default: one run at a time, no cluster")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="fan the runs out over a running Dask cluster (its workers need claim-chaos "
                             "installed and the store path)")
    parser.add_argument("--shard", default=None, metavar="i/n",
                        help="run only combinations i, i+n, i+2n, ... (counting from 1), for a CI system "
                             "that runs its own matrix")


ROW = "{:<12} {:<22} {:>6} {:<10} {:>6} {:>8}  {}"


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    requests = expand(matrix, args.matrix, args.store)
    planned = len(requests)
    shard = parse_shard(args.shard) if args.shard is not None else None
    requests = shard_of(requests, shard)
    engine = _engine(args)
    if not args.dry_run:  # refuse unusable outputs before minutes of runs, not after
        writable_dir(args.store or matrix.get("store", "store"), "--store" if args.store else f"{args.matrix}: store")
        if args.junit:
            _check_output_file(args.junit, "--junit")
    of = f" (shard {args.shard} of {planned})" if shard else ""
    print(f"{len(requests)} runs from {args.matrix}{of}" + (f", on {engine}" if engine else ""), flush=True)
    print(ROW.format("backend", "nemeses", "seed", "verdict", "ops", "seconds", "run dir"), flush=True)
    if args.dry_run:
        for r in requests:
            print(ROW.format(_label(r), ",".join(r.nemesis) or "none", r.seed, "-", "-", "-", "-"))
        return 0
    store = os.path.abspath(args.store or matrix.get("store", "store"))
    name = str(matrix.get("name", "matrix")) + (f"-shard{shard[0] + 1}of{shard[1]}" if shard else "")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    about = [f"matrix {os.path.abspath(args.matrix)}{of}", f"engine: {engine or 'one run at a time'}"]
    where = os.path.join(store, "campaigns", f"{name}-{stamp}")
    outcomes, summary, interrupted = _stream(requests, args, lambda started, started_utc: CampaignReport(
        where, f"chaos test-all {name}", about, len(requests), started, started_utc))
    code = worst(o.exit_code for o in outcomes) if outcomes else ExitCode.VALID
    order = {id(r): i for i, r in enumerate(requests)}
    outcomes.sort(key=lambda o: order.get(id(o.request), 0))
    path = _write_matrix_junit(args, matrix, outcomes, f"{name}-{stamp}")
    counts = {v: sum(o.verdict == v for o in outcomes) for v in sorted({o.verdict for o in outcomes})}
    print(f"\n{', '.join(f'{n} {v}' for v, n in counts.items()) or 'no runs'}; junit: {path}; campaign: {summary}; "
          + (str(interrupted) if interrupted else f"exit {int(code)} ({code.name.lower()})"), flush=True)
    if interrupted:
        raise KeyboardInterrupt
    return int(code)


def _stream(requests: list[RunRequest], args, open_report) -> tuple[list, str, str | None]:
    """Run every request, each outcome into the campaign report as it arrives; returns the outcomes,
    the summary's path and, after a Ctrl-C, how far the campaign got (the caller re-raises)."""
    started, started_utc = time.monotonic(), utc_now()
    campaign = None  # made with the first result: a cluster that never answered leaves no empty report
    outcomes, interrupted = [], None
    try:  # closing: a Ctrl-C between two results still closes the cluster before the report is written
        with sigterm_as_ctrl_c(), contextlib.closing(_outcomes(requests, args)) as results:
            for _, o in results:
                campaign = campaign or open_report(started, started_utc)
                outcomes.append(o)
                campaign.add(_record(o, campaign.elapsed()))
                _print_row(o)
    except KeyboardInterrupt:  # what finished is reported (campaign and JUnit), then the exit is 130
        interrupted = f"interrupted after {len(outcomes)} of {len(requests)} runs"
    summary = campaign.close(interrupted or "complete") if campaign else "(no runs)"
    return outcomes, summary, interrupted


def _engine(args) -> str | None:
    """Where the runs go: None (one at a time, here), or the Dask cluster the flags name."""
    if args.scheduler is not None and args.workers is not None:
        raise UsageError("chaos test-all: --workers sizes a local cluster; a --scheduler's cluster has its own")
    if args.scheduler is not None:
        check_scheduler_address(args.scheduler)
        return f"Dask scheduler {args.scheduler}"
    if args.workers is not None:
        if not 1 <= args.workers <= 512:
            raise UsageError(f"chaos test-all: --workers {args.workers}: expected 1 to 512 worker processes")
        return f"a Dask LocalCluster of {args.workers} worker processes"
    return None


def _outcomes(requests: list[RunRequest], args):
    """``(request, outcome)`` for every request, as each run finishes."""
    if args.scheduler is None and args.workers is None:
        for req in requests:
            yield req, run_one(req)
        return
    # runs side by side each need their own STORE/<name>/ (new_run_dir tells them apart by name)
    items = [(i, {**req.__dict__, "name": f"{req.name}-seed{req.seed}"}) for i, req in enumerate(requests)]
    for (i, _), result in fan_out(run_request, items, scheduler=args.scheduler, workers=args.workers):
        if isinstance(result, RunOutcome):
            result.request = requests[i]
            yield requests[i], result
        else:  # the run's worker died or the call failed: a crashed run, never a missing one
            yield requests[i], RunOutcome(requests[i], int(ExitCode.CRASH), None, {}, 0.0, str(result))


def run_request(item: tuple) -> RunOutcome:
    """A cluster worker's part: ``item`` is ``(index, RunRequest fields)``, plain data."""
    return run_one(RunRequest(**item[1]))


def _label(req: RunRequest) -> str:
    return req.backend if not req.factory else req.factory.rpartition(":")[2]


def _print_row(o: RunOutcome) -> None:
    req = o.request
    ops = (o.results.get("stats") or {}).get("ops", "-")
    print(ROW.format(_label(req), ",".join(req.nemesis) or "none", req.seed, o.verdict, ops, f"{o.wall_s:.1f}",
                     o.run_dir or f"(no run dir: exit {o.exit_code})"), flush=True)
    if (not o.run_dir or o.verdict == "crashed") and o.output.strip():
        print("    " + o.output.strip().splitlines()[-1], flush=True)
    if o.verdict == "unknown":  # the row alone does not say why the run proved nothing
        for note in (o.results.get("notes") or [])[:3]:
            print(f"    {note}", flush=True)


def _record(o: RunOutcome, done_at: float) -> SeedRecord:
    req = o.request
    lines = o.output.strip().splitlines()
    return SeedRecord(backend=_label(req), workload=req.workload, nemeses=",".join(req.nemesis) or "none",
                      seed=req.seed, verdict=o.verdict, exit_code=o.exit_code, findings=findings_of(o.results),
                      ops=(o.results.get("stats") or {}).get("ops"), run_s=round(o.wall_s, 3),
                      done_at_s=round(done_at, 3), run_dir=o.run_dir,
                      error=None if o.run_dir and o.verdict != "crashed" else
                      (lines[-1][:300] if lines else f"exit {o.exit_code}"))


def _check_output_file(path: str, flag: str) -> None:
    """``path`` can be written: its directory exists and takes a new file, and it is not a directory."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory")
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: no such directory {parent}")
    try:
        writable_dir(parent, flag)
    except UsageError:
        raise UsageError(f"{flag} {path}: directory {parent} is not writable") from None


def _write_matrix_junit(args, matrix: dict, outcomes: list, campaign_name: str) -> str:
    from chaos.reports.junit import matrix_junit
    from chaos.reports.load import RunData, load_run

    runs = []
    for o in outcomes:
        if o.run_dir and os.path.isdir(o.run_dir):
            runs.append(load_run(o.run_dir))
        elif o.run_dir:  # written by a worker on another machine: what it sent back is what we know
            runs.append(RunData(run_dir=o.run_dir, results=o.results, test=o.results.get("test") or {}))
        else:
            r = o.request
            runs.append(RunData(run_dir="(none)", test={"name": r.name, "backend": r.backend, "seed": r.seed,
                                                        "nemesis": r.nemesis},
                                problems=[f"chaos run exited {o.exit_code} without a run directory",
                                          o.output.strip()[-2000:]]))
    store = os.path.abspath(args.store or matrix.get("store", "store"))
    os.makedirs(store, exist_ok=True)
    path = args.junit or os.path.join(store, f"test-all-{campaign_name}.xml")
    with open(path, "w") as f:
        f.write(matrix_junit(runs, name=f"chaos test-all {matrix.get('name', '')}".strip()))
    return path
