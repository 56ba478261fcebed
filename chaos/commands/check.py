"""``chaos check RUN_DIR``: re-check a stored run without running anything.

Reads ``RUN_DIR/history.jsonl`` once, streaming (``checkers.history.History``;
``test.yaml`` / ``results.json`` give the checker context when present), runs
the standard checkers over that one history, prints one line per
checker and every anomaly's explanation, and exits 0 valid / 1 invalid /
2 unknown. ``--write`` stores the ``checkers`` section and the new verdict back
into ``results.json`` (a run whose requested faults never took effect stays
``unknown``) and re-renders ``report.html`` / ``junit.xml``; ``--json`` prints
the whole result object instead of the table.
"""

from __future__ import annotations

import argparse
import json
import os

from backends import safeload
from chaos.errors import ExitCode, UsageError
from checkers import default_checkers, run_checkers
from checkers.history import History, read_history

#: the checkers that read what ``History.read(jobs=2)``'s helper process finds (the raw replies' checks)
RAW_REPLY_CHECKERS = frozenset(("envelopes", "requests"))

EMPTY_HISTORY = "the history holds no operations: nothing was checked"

_VERDICT_EXIT = {True: ExitCode.VALID, False: ExitCode.INVALID, "unknown": ExitCode.UNKNOWN}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory holding history.jsonl")
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    parser.add_argument("--write", action="store_true", help="write the checkers section back into results.json")
    parser.add_argument("--no-linearizable", action="store_true", help="skip the linearizability checker")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated checker names to run")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                        help="processes to read the history in (default: 2 on a machine with 2 or more "
                             "cores): with 2, a helper process checks the raw replies (envelope shapes, "
                             "publish requests and candidates) while this one builds the ops and checks "
                             "them; 1 does everything in one process")


def load_context(run_dir: str) -> dict:
    """Checker context from ``results.json`` / ``test.yaml`` (both optional)."""
    ctx: dict = {}
    results = _read_json(os.path.join(run_dir, "results.json"))
    test = _read_yaml(os.path.join(run_dir, "test.yaml"))
    for source in (test, results):
        if not isinstance(source, dict):
            continue
        for key in ("backend", "capabilities", "initial_durable", "initial_revisions", "floor_jump_threshold_ms"):
            if key in source:
                ctx[key] = source[key]
        inner = source.get("ctx")
        if isinstance(inner, dict):
            ctx.update(inner)
    if isinstance(ctx.get("backend"), dict):  # test.yaml may hold the backend spec
        ctx["backend"] = ctx["backend"].get("backend") or ctx["backend"].get("name")
    return ctx


def run(args: argparse.Namespace) -> int:
    run_dir = args.run_dir
    path = os.path.join(run_dir, "history.jsonl")
    if not os.path.isdir(run_dir):
        raise UsageError(f"chaos check: {run_dir}: no such run directory")
    if not os.path.isfile(path):
        raise UsageError(f"chaos check: {run_dir}: no history.jsonl in this directory")
    ctx = load_context(run_dir)
    if ctx.get("protocol") == "issue-lock":  # a --workload issue-lock run: that protocol's checkers
        import checkers.issuelock as issuelock

        checkers, run_checkers_of = dict(issuelock.ISSUELOCK_CHECKERS), issuelock.run_checkers
        reader = lambda path, jobs: read_history(path)  # noqa: E731 - that protocol pairs the raw records itself
    else:
        checkers, run_checkers_of = default_checkers(include_linearizable=not args.no_linearizable), run_checkers
        reader = History.read  # the one history type, read once, streaming
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(names) - set(checkers))
        if unknown:
            raise UsageError(f"chaos check: unknown checker(s) {', '.join(unknown)}; known: {', '.join(checkers)}")
        checkers = {n: checkers[n] for n in names}
    if args.jobs < 1:
        raise UsageError(f"chaos check: --jobs must be at least 1, got {args.jobs}")
    jobs = args.jobs if RAW_REPLY_CHECKERS & set(checkers) else 1  # nothing else reads the helper's findings
    try:
        history = reader(path, jobs=jobs)
    except (OSError, ValueError) as e:
        raise UsageError(f"chaos check: {path}: unreadable history ({e})") from None
    result = run_checkers_of(history, ctx, checkers)
    if len(history) == 0:   # every checker agrees with an empty history: nothing was checked
        result["valid"] = "unknown"
        result["unknown_reason"] = EMPTY_HISTORY
    if getattr(history, "helper", None):  # --jobs 2: the read's helper process and its resources
        import resource

        result["processes"] = {"helper": history.helper,
                               "parent_max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    if args.json:
        print(json.dumps(_printable(result), indent=2, sort_keys=True))
    else:
        print(render(result, len(history)))
    if args.write:
        _write_back(os.path.join(run_dir, "results.json"), result)
        from chaos.reports import write_all

        write_all(run_dir)
    return int(_VERDICT_EXIT.get(result["valid"], ExitCode.UNKNOWN))


def render(result: dict, n_ops: int) -> str:
    """The short per-checker table and each anomaly's explanation."""
    lines = [f"{n_ops} history entries", f"{'checker':<20} {'verdict':<8} {'anomalies':>9} {'seconds':>8}"]
    for name, r in result["checkers"].items():
        stats = r.get("stats") or {}
        total = stats.get("anomalies_total", len(r.get("anomalies") or []))
        lines.append(f"{name:<20} {_word(r.get('valid')):<8} {total:>9} {stats.get('seconds', 0):>8.3f}")
    for name, r in result["checkers"].items():
        if r.get("error"):
            lines.append(f"\n[{name}] checker crashed: {r['error']}")
        for reason in r.get("unknown_reasons") or []:
            lines.append(f"\n[{name}] unknown: {reason}")
        for a in r.get("anomalies") or []:
            lines.append(f"\n[{name}] {a.get('type')} (ops {a.get('ops')}):\n  {a.get('explanation')}")
    if result.get("unknown_reason"):
        lines.append(f"\n{result['unknown_reason']}")
    lines.append(f"\nverdict: {_word(result['valid'])}")
    return "\n".join(lines)


def _word(valid) -> str:
    return {True: "valid", False: "INVALID"}.get(valid, "unknown")


def _printable(result: dict) -> dict:
    """Drop tracebacks from the JSON form (the error line stays)."""
    out = {"valid": result["valid"], "checkers": {}}
    for name, r in result["checkers"].items():
        out["checkers"][name] = {k: v for k, v in r.items() if k != "traceback"}
    if result.get("unknown_reason"):
        out["unknown_reason"] = result["unknown_reason"]
    if "processes" in result:  # --jobs 2: the helper process of the read, and its resources
        out["processes"] = result["processes"]
    return out


def _write_back(path: str, result: dict) -> None:
    data = _read_json(path)
    if not isinstance(data, dict):
        data = {}
    printable = _printable(result)
    data["checkers"] = printable["checkers"]
    valid = printable["valid"]
    coverage = data.get("fault_coverage") or {}
    if valid is True and any(c.get("requested") and not c.get("took_effect") for c in coverage.values()):
        valid = "unknown"  # a requested fault that never took effect proves nothing
    data["verdict"] = {True: "valid", False: "invalid"}.get(valid, "unknown")
    data["exit_code"] = int(_VERDICT_EXIT.get(valid, ExitCode.UNKNOWN))
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: str):
    if not os.path.lexists(path):
        return None
    try:
        return safeload.json_file(path, safeload.RESULTS, "results")
    except safeload.LoadError as e:
        raise UsageError(f"chaos check: {e}") from None


def _read_yaml(path: str):
    if not os.path.lexists(path):
        return None
    try:
        return safeload.yaml_file(path, safeload.CONFIG, "test config")
    except safeload.LoadError as e:
        raise UsageError(f"chaos check: {e}") from None
