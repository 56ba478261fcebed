"""The end of ``chaos run`` on the console: a short summary a person reads.

``summary(results, run_dir)`` is built from ``results.json`` alone (so
``chaos check`` and a stored run say the same). ``chaos run`` prints it on
stdout (progress and logs go to stderr: ``chaos run > out.txt`` keeps just
this), and the verdict is its LAST line, after everything else::

      checkers   linearizable valid; dual_ownership valid; ... (one line each, the first anomaly or reason)
      faults     kill 3 took effect of 3; clock NEVER took effect (fired 1)
      workload   14 of 14 requested paths completed
      evidence   THIN: 75% of 400 replies were claim-store-unavailable ... (or the measures, when fine)
      known      F1 (stale-read) x2: acknowledged in the profile
      notes      the workload started ops until 1.2 s past its time limit ...
      report     store/claims-sqlite/20260101T000000.000Z/report.html
      reproduce  chaos run --backend sqlite ... --seed 7
      next       chaos check RUN_DIR   (an interrupted run: check what it recorded)
    chaos: VALID -- claims on sqlite, seed 7: 412 ops (ok 301, fail 97, info 14) in 34.2 s

Only sections with something to say are printed; a line never wraps a whole
anomaly explanation (the report has it).
"""

from __future__ import annotations

import os

from chaos.reports.evidence import summary_line as evidence_line

WIDTH = 110
#: the note the runner leaves on a run stopped by Ctrl-C / SIGTERM
INTERRUPTED = "interrupted"


def _clip(text: str, width: int = WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _dict(x) -> dict:
    return x if isinstance(x, dict) else {}


def _word(valid) -> str:
    return {True: "valid", False: "INVALID"}.get(valid, "unknown")


def anomaly_counts(stats) -> str | None:
    """"by type: N type, ..." when a checker's anomalies are of more than one
    type (the console's and report.html's words): the first anomaly's type is
    not the only rule that broke."""
    by_type = _dict(_dict(stats).get("anomalies_by_type"))
    return "by type: " + ", ".join(f"{n} {t}" for t, n in by_type.items()) if len(by_type) > 1 else None


def _checker_lines(name: str, r: dict) -> list[str]:
    """The checker's line, and a second one with ``anomaly_counts``."""
    counts = anomaly_counts(r.get("stats"))
    return [_checker_line(name, r)] + ([f"{'':<31} {_clip(counts, 80)}"] if counts else [])


def _checker_line(name: str, r: dict) -> str:
    stats = _dict(r.get("stats"))
    anomalies = r.get("anomalies") if isinstance(r.get("anomalies"), list) else []
    total = stats.get("anomalies_total", len(anomalies))
    line = f"{name:<22} {_word(r.get('valid')):<8}"
    if r.get("error"):
        return f"{line} checker crashed: {_clip(r['error'], 70)}"
    if anomalies:
        first = _dict(anomalies[0])
        more = f" (+{total - 1} more)" if isinstance(total, int) and total > 1 else ""
        where = _clip(f"{first.get('type', 'anomaly')} at ops {first.get('ops', '?')}", 80)
        return f"{line} {where}{more}"
    reasons = r.get("unknown_reasons") if isinstance(r.get("unknown_reasons"), list) else []
    if reasons and r.get("valid") not in (True, False):
        return f"{line} {_clip(reasons[0], 70)}"
    return line.rstrip()


def _faults(coverage: dict) -> list[str]:
    out = []
    for name, row in coverage.items():
        row = _dict(row)
        fired, took = row.get("fired", 0), row.get("took_effect", 0)
        if row.get("requested") and not fired:
            out.append(f"{name} NEVER fired")
        elif row.get("requested") and not took:
            out.append(f"{name} NEVER took effect (fired {fired})")
        elif row.get("requested") or fired:
            out.append(f"{name} {took} took effect of {fired} fired")
    return out


def _workload(coverage: dict) -> str | None:
    rows = {k: _dict(v) for k, v in coverage.items()}
    requested = [k for k, v in rows.items() if v.get("requested")]
    if not requested:
        return None
    never = [k for k in requested if not rows[k].get("completed")]
    line = f"{len(requested) - len(never)} of {len(requested)} requested paths completed"
    return line + (f"; never: {', '.join(never)}" if never else "")


def _known(results: dict) -> list[str]:
    out = []
    for d in results.get("known_deviations") or []:
        d = _dict(d)
        if d.get("matched"):
            within = f" within {d['within']}" if d.get("within") else ""
            out.append(f"{d.get('id')} ({d.get('anomaly')}{within}) x{d['matched']}: {_clip(d.get('reason', ''), 60)}")
        else:
            out.append(f"{d.get('id')} matched nothing in this run (acknowledgement unused)")
    return out


def _seconds(x) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "?"


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def summary(results: dict, run_dir: str) -> str:
    """The summary lines (no trailing newline)."""
    test, stats = _dict(results.get("test")), _dict(results.get("stats"))
    verdict = str(results.get("verdict", "unknown"))
    head = (f"chaos: {verdict.upper()} -- {test.get('workload', '?')} on {test.get('backend', '?')}, "
            f"seed {test.get('seed', '?')}: {stats.get('ops', 0)} ops (ok {stats.get('ok', 0)}, "
            f"fail {stats.get('fail', 0)}, info {stats.get('info', 0)}) in {_seconds(stats.get('duration_s'))} s")
    lines: list[str] = []

    def section(title: str, items: list[str]) -> None:
        for i, item in enumerate(items):
            lines.append(f"  {title if i == 0 else '':<10} {item}")

    checkers = _dict(results.get("checkers"))
    section("checkers", [ln for n, r in checkers.items() for ln in _checker_lines(n, _dict(r))] or ["none ran"])
    section("faults", _faults(_dict(results.get("fault_coverage"))) or ["none requested"])
    workload = _workload(_dict(results.get("workload_coverage")))
    if workload:
        section("workload", [workload])
    if isinstance(results.get("evidence"), dict):
        section("evidence", [_clip(evidence_line(results["evidence"]), 200)])
    section("known", _known(results))
    notes = [str(n) for n in results.get("notes") or []]
    section("notes", [_clip(n) for n in notes])
    report = os.path.join(run_dir, "report.html")
    section("report", [_shown_path(report) if os.path.exists(report) else f"(not written) {_shown_path(run_dir)}"])
    if test.get("command"):
        section("reproduce", [str(test["command"])])
    if any(INTERRUPTED in n for n in notes):
        section("next", [f"chaos check {_shown_path(run_dir)}   (checks what the interrupted run recorded)"])
    lines.append(head)
    return "\n".join(lines)
