"""``report.html``: one self-contained page a person reads to judge a run.

Everything is inline (CSS in a ``<style>``, plots as base64 PNG ``<img>``s),
so the file can be mailed, attached to a CI job or opened from a tarball with
no network. No JavaScript. The page leads to the cause: a navigation bar,
the verdict on one line with what ran, the findings summary (one row per
broken rule with its count, ``chaos.reports.findings``), the evidence the
verdict rests on (thin evidence flagged, ``chaos.reports.evidence``), then
per rule its minimal instance expanded and the others collapsed
(``<details>``), each op shown as ``process op(args) -> reply`` with
digests shortened (``chaos.reports.oplines``; the raw records a click
away), then the run's details, the checkers, the plots (timeline, latency,
throughput, clocks), the fault-coverage and the workload-coverage tables.

Every plot is an ``<img id="plot-...">`` with an ``alt`` text; a plot with
nothing to draw is replaced by a ``<p class="noplot" id="plot-...">`` saying
why, so a reader (and the browser test) can tell "empty" from "broken".
"""

from __future__ import annotations

import base64
import html
import json
import os

from chaos.reports import analysis, plots
from chaos.reports.console import anomaly_counts
from chaos.reports.evidence import evidence as measure_evidence
from chaos.reports.findings import Rule, group
from chaos.reports.load import RunData
from chaos.reports.oplines import op_line

MAX_ANOMALIES = 40          # per rule; the rest are counted, and are in results.json
MAX_OPS_PER_ANOMALY = 12
VERDICT_COLORS = {"valid": "#1b7f3b", "invalid": "#c62828", "unknown": "#b26a00"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:16px 24px;color:#222}
h1{font-size:1.3em;margin:.2em 0} h2{border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:1.6em}
.verdict{color:#fff;font-size:2.2em;font-weight:700;padding:10px 18px;border-radius:6px;display:inline-block;letter-spacing:.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.88em}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.v-valid{color:#1b7f3b;font-weight:600}.v-invalid{color:#c62828;font-weight:600}.v-unknown{color:#b26a00;font-weight:600}
.anomaly{border-left:4px solid #c62828;padding:4px 12px;margin:12px 0;background:#fff7f7}
.problems{background:#fff4e0;border:1px solid #f0c36d;padding:6px 12px}
img.plot{max-width:100%;display:block;margin:6px 0;border:1px solid #eee}
.noplot{color:#777;font-style:italic} .meta td:first-child{font-weight:600;white-space:nowrap}
.op-ok{background:#eaf3fd}.op-fail{background:#fcebf6}.op-info,.op-open{background:#fff2df}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 0;z-index:9;font-size:.9em}
nav a{margin-right:14px;text-decoration:none;color:#1a5fb4} h1 .verdict{font-size:1em;padding:5px 14px;margin-right:10px;vertical-align:middle}
.runline{color:#444;margin:.3em 0 .6em} .findings td.count{text-align:right;font-weight:600}
.thin{background:#fff4e0;border:1px solid #f0c36d;padding:4px 12px} .fine{color:#1b7f3b}
td.opline{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;word-break:break-all}
details.more{margin:8px 0 16px} details.more>summary{cursor:pointer;color:#1a5fb4}
"""

NAV = (("findings", "Findings"), ("evidence", "Evidence"), ("anomalies", "Anomalies"), ("run", "Run"),
       ("checkers", "Checkers"), ("timeline", "Timeline"), ("performance", "Latency"), ("clocks", "Clocks"),
       ("faults", "Faults"), ("workload", "Workload coverage"), ("files", "Files"))


def render(run: RunData) -> str:
    """The whole page for one run."""
    workers = analysis.infer_workers(run.history, run.test_info.get("workers"))
    spans = analysis.op_spans(run.history, workers)
    windows = analysis.nemesis_windows(run.history)
    horizon = analysis.end_time(run.history)
    rules = group(run.checkers)
    highlight = {i for rule in rules for a in rule.instances[:1] for i in (a.get("ops") or []) if isinstance(i, int)}
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{_e(run.name)}: {_e(run.verdict)}</title><style>{CSS}</style></head><body>",
        _nav(),
        _title(run),
        _summary(run, rules),
        _evidence(run),
        _anomalies(run, spans, rules),
        _header(run),
        _checkers(run),
        _known(run),
        "<h2 id=\"timeline\">Timeline</h2>",
        _img("plot-timeline", "Timeline of operations per worker, colored by outcome, nemesis windows shaded",
             plots.timeline(spans, windows, workers, horizon, highlight), "no operations recorded"),
        "<h2 id=\"performance\">Latency and throughput</h2>",
        _img("plot-latency", "Latency per operation with p50, p95 and p99 over time",
             plots.latency(analysis.latency_points(spans),
                           analysis.quantile_series(analysis.latency_points(spans)), windows, horizon),
             "no completed operations"),
        _img("plot-throughput", "Completed operations per second by outcome",
             plots.rate(*analysis.throughput(spans, horizon), windows, horizon), "no completed operations"),
        "<h2 id=\"clocks\">Clocks</h2>",
        "<p>Offsets are relative to the runner's monotonic clock (0 = the usual relation of the two clocks). "
        "Dots: each worker's wall clock at completion (<code>wall_ms</code>); dashed: the offset the clock "
        "nemesis set; crosses: the offset the target worker itself reported (its own clock); black: the "
        "backend's decision time (<code>observed_at</code>), which must never go back while a worker's clock "
        "does: that is the durable floor.</p>",
        "" if any(w == w for w in run.history.wall) else
        "<p class=\"noplot\">This history carries no <code>wall_ms</code>: worker clocks are shown as the "
        "nemesis set and measured them, not as each worker saw them.</p>",
        _img("plot-clock", "Wall-clock offset of each worker and the backend's decision time (floor)",
             plots.clocks(analysis.clock_series(run.history, spans), windows, horizon),
             "no wall-clock data in this history"),
        _coverage(run, windows),
        _workload_coverage(run),
        _files(),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _nav() -> str:
    return '<nav id="nav">' + "".join(f'<a href="#{a}">{t}</a>' for a, t in NAV) + "</nav>"


def _title(run: RunData) -> str:
    """The verdict and what ran, on two lines."""
    t, stats = run.test_info, run.results.get("stats") or {}
    color = VERDICT_COLORS[run.verdict]
    ops = ", ".join(f"{k} {stats[k]}" for k in ("ok", "fail", "info") if k in stats)
    line = " &middot; ".join(x for x in (
        f"backend <b>{_e(t.get('backend', '?'))}</b>", _e(t.get("workload", "?")),
        f"nemesis {_e(', '.join(t.get('nemesis') or []) or 'none')}", f"seed <code>{_e(t.get('seed', '?'))}</code>",
        f"{_e(t.get('workers', '?'))} workers, {_e(t.get('time_limit', '?'))} s",
        f"{_e(stats.get('ops', len(run.history)))} ops" + (f" ({_e(ops)})" if ops else "")) if x)
    return (f'<h1><span class="verdict" id="verdict" style="background:{color}">{_e(run.verdict.upper())}</span>'
            f'claim-chaos run <code>{_e(run.name)}</code></h1><div class="runline">{line}</div>')


def _summary(run: RunData, rules: list[Rule]) -> str:
    """One row per broken rule: checker, rule, count, a link to its minimal instance."""
    out = ['<h2 id="findings">Findings</h2>']
    if rules:
        out.append('<table class="findings" id="findings-summary"><tr><th>rule</th><th>checker</th>'
                   "<th>count</th><th>first (minimal) instance</th></tr>")
        for rule in rules:
            first = rule.instances[0] if rule.instances else None
            link = (f'<a href="#{rule.anchor}">ops {_e(first.get("ops"))}</a>' if first else
                    "none listed (see results.json)")
            out.append(f"<tr><td><b>{_e(rule.type)}</b></td><td>{_e(rule.checker)}</td>"
                       f'<td class="count">{rule.count}</td><td>{link}</td></tr>')
        out.append("</table>")
    else:
        undecided = [n for n, r in run.checkers.items() if isinstance(r, dict) and r.get("valid") not in (True, False)]
        out.append("<p>No checker found a violation"
                   + (f"; could not decide: {_e(', '.join(undecided))}." if undecided else ".") + "</p>")
    notes = run.results.get("notes") or []
    if notes:
        out.append('<div class="problems" id="notes"><b>Notes from the run:</b><ul>'
                   + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul></div>")
    if run.problems:
        out.append('<div class="problems" id="problems"><b>This run is incomplete:</b><ul>'
                   + "".join(f"<li>{_e(p)}</li>" for p in run.problems) + "</ul></div>")
    return "\n".join(out)


def _evidence(run: RunData) -> str:
    """How much the verdict rests on: the runner's measures, else measured here (an older run)."""
    ev = run.results.get("evidence")
    if not isinstance(ev, dict):
        h, ops = run.history, []
        for n, op in enumerate(h.ops):   # the parsed history has each reply's code: no record is read again
            if op.process is not None and op.cp is not None:
                ops.append({"process": op.process, "type": op.type, "time": h.times(n)[1],
                            "value": {"envelope": {"error": {"code": op.code}}}})
        ev = measure_evidence(ops, run.test_info.get("time_limit"), run.results.get("workload_coverage"))
    measures = (f"{ev.get('replies', 0)} replies, {ev.get('store_unavailable', 0)} of them claim-store-unavailable "
                f"({ev.get('store_unavailable_share', 0):.0%}); longest stretch with no completed op in the time "
                f"limit: {max((b - a for a, b in ev.get('stalls_s') or []), default=0):.1f} s"
                + (" (counted from 5 s)" if ev.get("stalls_s") else " (none of 5 s or more)")
                + (f"; {ev.get('paths_exercised')} of {ev.get('paths_known')} contract paths exercised"
                   if ev.get("paths_known") else ""))
    out = ['<h2 id="evidence">Evidence</h2>']
    if ev.get("thin"):
        out.append('<div class="thin" id="thin-evidence"><b>Thin evidence: the verdict rests on less than it '
                   "seems.</b><ul>" + "".join(f"<li>{_e(t)}</li>" for t in ev["thin"]) + "</ul></div>")
    else:
        out.append('<p class="fine" id="evidence-fine">Nothing thin.</p>')
    out.append(f"<p>{_e(measures)}.</p>")
    return "\n".join(out)


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _img(pid: str, alt: str, png: bytes | None, why_empty: str) -> str:
    if png is None:
        return f'<p class="noplot" id="{pid}">({_e(alt)}: {_e(why_empty)})</p>'
    data = base64.b64encode(png).decode()
    return f'<img class="plot" id="{pid}" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _capability(caps) -> str:
    if not isinstance(caps, dict):
        return "not reported"
    result = caps.get("result") if isinstance(caps.get("result"), dict) else caps
    wc = ((result.get("operations") or {}).get("work_claim") or {}) if isinstance(result, dict) else {}
    backend = result.get("backend") if isinstance(result.get("backend"), dict) else {}
    bits = [f"mode <b>{_e(wc.get('mode', '?'))}</b>"]
    if "safe_exclusive_dispatch" in wc:
        bits.append(f"safe_exclusive_dispatch={_e(json.dumps(wc['safe_exclusive_dispatch']))}")
    if "fencing_enforced_at" in wc:
        bits.append(f"fencing at {_e(wc['fencing_enforced_at'])}")
    if backend.get("coordination_scope"):
        bits.append(f"scope {_e(backend['coordination_scope'])}")
    return ", ".join(bits)


def _header(run: RunData) -> str:
    t, stats = run.test_info, run.results.get("stats") or {}
    rows = [
        ("backend", _e(t.get("backend", "?"))),
        ("capability", _capability(run.results.get("capabilities"))),
        ("workload", _e(t.get("workload", "?"))),
        ("nemesis", _e(", ".join(t.get("nemesis") or []) or "none")),
        ("workers / time limit", f"{_e(t.get('workers', '?'))} / {_e(t.get('time_limit', '?'))} s"),
        ("seed", f"<code>{_e(t.get('seed', '?'))}</code>"),
        ("started / finished", f"{_e(run.results.get('started_at', '?'))} / {_e(run.results.get('finished_at', '?'))}"),
        ("operations", _e(", ".join(f"{k} {stats[k]}" for k in ("ops", "ok", "fail", "info", "duration_s")
                                    if k in stats) or f"{len(run.history)} history entries")),
        ("run directory", f"<code>{_e(run.results.get('run_dir') or run.run_dir)}</code>"),
    ]
    out = ['<h2 id="run">Run</h2>',
           '<table class="meta">' + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows) + "</table>"]
    if run.command:
        out.append(f'<p>Reproduce this run (same seed, same schedule):</p><pre id="reproduce">{_e(run.command)}</pre>')
    scripts = _repro_scripts(run.run_dir)
    if scripts:   # written by ``chaos repro`` (which writes this page again)
        out.append('<p>Its findings without the suite (<code>chaos repro</code>; each showed its finding 3 of 3):</p>'
                   '<ul id="repro">' + "".join(f'<li><a href="{_e(path)}">{_e(path)}</a></li>' for path in scripts)
                   + "</ul>")
    return "\n".join(out)


def _repro_scripts(run_dir: str) -> list[str]:
    """``repro/<finding>/repro.sh`` of every standalone reproduction kept beside the run, relative to it."""
    root = os.path.join(run_dir, "repro")
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    return [f"repro/{n}/repro.sh" for n in names if os.path.isfile(os.path.join(root, n, "repro.sh"))]


def _word(valid) -> str:
    return {True: "valid", False: "invalid"}.get(valid, "unknown")


def _checkers(run: RunData) -> str:
    if not run.checkers:
        return '<h2 id="checkers">Checkers</h2><p class="noplot">No checker results (the run did not reach analysis).</p>'
    rows = []
    for name, r in run.checkers.items():
        r = r if isinstance(r, dict) else {}
        word = _word(r.get("valid"))
        stats = r.get("stats") or {}
        total = stats.get("anomalies_total", len(r.get("anomalies") or []))
        notes = [_e(r["error"])] if r.get("error") else []
        notes += [_e(x) for x in (r.get("unknown_reasons") or [])[:5]]
        if r.get("known"):
            notes.append(f"{len(r['known'])} known (acknowledged by the profile)")
        counts = anomaly_counts(stats)
        if counts:
            notes.append(_e(counts))
        secs = stats.get("seconds")
        rows.append(f'<tr><td>{_e(name)}</td><td class="v-{word}">{word}</td><td>{_e(total)}</td>'
                    f'<td>{"" if secs is None else f"{secs:.3f}"}</td><td>{"<br>".join(notes)}</td></tr>')
    return ('<h2 id="checkers">Checkers</h2><table id="checker-table"><tr><th>checker</th><th>verdict</th>'
            '<th>anomalies</th><th>seconds</th><th>notes</th></tr>' + "".join(rows) + "</table>")


def _short(obj, limit: int = 400) -> str:
    text = json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."


def _anomalies(run: RunData, spans: list, rules: list[Rule]) -> str:
    """Per rule: its minimal instance expanded, the others behind a ``<details>``."""
    by_index: dict[int, object] = {}
    for s in spans:
        by_index[s.invoke_index] = s
        if s.completion_index is not None:
            by_index[s.completion_index] = s
    wanted = {i for rule in rules for a in rule.instances[:MAX_ANOMALIES]
              for i in (a.get("ops") or [])[:MAX_OPS_PER_ANOMALY] if isinstance(i, int)}
    for i in list(wanted):  # show each op whole: its invoke and its completion
        span = by_index.get(i)
        if span is not None:
            wanted.update(x for x in (span.invoke_index, span.completion_index) if x is not None)
    raw = run.history.raw(wanted)  # the original records, read back for these few ops only
    out = ['<h2 id="anomalies">Anomalies</h2>']
    count = 0

    def instance(rule: Rule, a: dict, anchor: str = "") -> None:
        nonlocal count
        count += 1
        out.append(f'<div class="anomaly"{anchor}><b>{_e(rule.checker)}: {_e(rule.type)}</b>'
                   f"<p>{_e(a.get('explanation'))}</p>")
        out.append(_ops_table(a.get("ops") or [], by_index, raw))
        out.append(_linearization(a, by_index, count))
        if a.get("data"):
            out.append(f"<details><summary>data</summary><pre>{_e(_short(a['data'], 4000))}</pre></details>")
        out.append("</div>")

    for rule in rules:
        if not rule.instances:
            out.append(f'<div class="anomaly" id="{rule.anchor}"><b>{_e(rule.checker)}: {_e(rule.type)}</b>'
                       f"<p>{rule.count} counted by the checker, none listed: see results.json.</p></div>")
            continue
        instance(rule, rule.instances[0], f' id="{rule.anchor}"')
        rest = rule.instances[1:MAX_ANOMALIES]
        unlisted = rule.count - 1 - len(rest)
        if rest:
            out.append(f'<details class="more"><summary>{len(rest)} more instance{"s" if len(rest) > 1 else ""} of '
                       f"{_e(rule.type)}</summary>")
            for a in rest:
                instance(rule, a)
            out.append("</details>")
        if unlisted > 0:
            out.append(f"<p>... and {unlisted} more {_e(rule.type)} in results.json.</p>")
    if count == 0:
        out.append("<p>None found.</p>")
    return "\n".join(out)


def _known(run: RunData) -> str:
    """Findings the profile acknowledges (``checkers.known``), and acknowledgements that matched nothing."""
    devs = run.results.get("known_deviations") or []
    if not devs:
        return ""
    out = ['<h2 id="known-deviations">Known deviations</h2><table><tr><th>id</th><th>anomaly</th><th>matched</th>'
           '<th>reason</th><th>reference</th></tr>']
    for d in devs:
        matched = d.get("matched", 0)
        within = f' (within {_e(d["within"])})' if d.get("within") else ""
        out.append(f'<tr><td>{_e(d.get("id"))}</td><td>{_e(d.get("anomaly"))}{within}</td>'
                   f'<td>{_e(matched) if matched else "0 (unused acknowledgement)"}</td>'
                   f'<td>{_e(d.get("reason"))}</td><td>{_e(d.get("reference") or "")}</td></tr>')
    out.append("</table>")
    for name, r in run.checkers.items():
        for a in ((r.get("known") or []) if isinstance(r, dict) else [])[:MAX_ANOMALIES]:
            out.append(f'<div class="known"><b>known {_e(name)}: {_e(a.get("type"))}</b> '
                       f'({_e((a.get("known") or {}).get("id"))}, ops {_e(a.get("ops"))})<p>{_e(a.get("explanation"))}</p></div>')
    return "\n".join(out)


def _linearization(anomaly: dict, by_index: dict, n: int) -> str:
    """A non-linearizable partition: its longest linearizable prefix and the illegal next ops, drawn."""
    data = anomaly.get("data") if isinstance(anomaly.get("data"), dict) else {}
    prefix, stuck = data.get("longest_linearization"), data.get("not_linearizable_after_it")
    if anomaly.get("type") != "nonlinearizable" or not isinstance(prefix, list) or not isinstance(stuck, list):
        return ""
    spans = {i: by_index[i] for i in prefix + stuck if isinstance(i, int) and i in by_index}
    first = data.get("first_to_return")
    return _img(f"plot-linearization-{n}", "Partial linearization: the longest linearizable prefix in order and "
                "the ops that cannot follow it", plots.linearization(spans, prefix, stuck,
                                                                      first if isinstance(first, int) else None,
                                                                      str(data.get("state_after_it", "?"))),
                "its ops are not in history.jsonl")


def _ops_table(indices: list, by_index: dict, raw: dict) -> str:
    """One row per op: ``process op(args) -> reply``, its raw records a click away."""
    rows, seen = [], set()
    for i in indices[:MAX_OPS_PER_ANOMALY]:
        span = by_index.get(i)
        if span is not None and id(span) in seen:
            continue
        if span is None:  # a nemesis op or an index outside the stored history
            op = raw.get(i)
            rows.append(f"<tr><td>#{_e(i)}</td><td colspan=3>{_e(_short(op) if op else 'not in history.jsonl')}</td></tr>")
            continue
        seen.add(id(span))
        invoke, done = raw.get(span.invoke_index) or {}, raw.get(span.completion_index)
        line = op_line(span.process, span.f, invoke.get("value"), done)
        records = _short(invoke, 2000) + ("" if done is None else "\n" + _short(done, 4000))
        rows.append(f'<tr class="op-{span.type}"><td>#{span.invoke_index}{"" if span.completion_index is None else f"/#{span.completion_index}"}</td>'
                    f"<td>{span.start:.3f}s{'' if span.end is None else f'..{span.end:.3f}s'}</td>"
                    f'<td class="opline">{_e(line)}</td>'
                    f"<td><details><summary>records</summary><pre>{_e(records)}</pre></details></td></tr>")
    more = len(indices) - MAX_OPS_PER_ANOMALY
    tail = f"<tr><td colspan=4>... {more} more ops</td></tr>" if more > 0 else ""
    return ("<table class=\"ops\"><tr><th>op</th><th>when</th><th>process op(args) -&gt; reply</th><th>raw</th></tr>"
            + "".join(rows) + tail + "</table>")


def _coverage(run: RunData, windows: list) -> str:
    cov = run.results.get("fault_coverage") or {}
    out = ['<h2 id="faults">Fault coverage</h2>']
    if cov:
        out.append('<table id="coverage-table"><tr><th>fault</th><th>requested</th><th>fired</th><th>took effect</th></tr>')
        for fault, row in cov.items():
            row = row if isinstance(row, dict) else {}
            bad = row.get("requested") and not row.get("took_effect")
            style = ' style="background:#fff2df"' if bad else ""
            out.append(f"<tr{style}><td>{_e(fault)}</td><td>{_e(row.get('requested'))}</td>"
                       f"<td>{_e(row.get('fired'))}</td><td>{_e(row.get('took_effect'))}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No fault coverage recorded.</p>")
    if windows:
        out.append(f"<details><summary>{len(windows)} nemesis events</summary><table><tr><th>fault</th><th>from</th>"
                   "<th>to</th><th>took effect</th><th>value</th></tr>")
        for w in windows[:500]:
            out.append(f"<tr><td>{_e(w.f)}</td><td>{w.start:.3f}s</td><td>{w.end:.3f}s</td>"
                       f"<td>{_e(w.took_effect)}</td><td><code>{_e(_short(w.value, 200))}</code></td></tr>")
        out.append("</table></details>")
    return "\n".join(out)


def _workload_coverage(run: RunData) -> str:
    """Per contract path: requested, attempted, completed (a requested path that
    never completed made the run unknown; it is highlighted)."""
    cov = run.results.get("workload_coverage") or {}
    out = ['<h2 id="workload">Workload coverage</h2>']
    if not cov:
        out.append("<p>No workload coverage recorded.</p>")
        return "\n".join(out)
    out.append('<table id="workload-coverage-table"><tr><th>contract path</th><th>requested</th>'
               "<th>attempted</th><th>completed</th></tr>")
    for path, row in cov.items():
        row = row if isinstance(row, dict) else {}
        bad = row.get("requested") and not row.get("completed")
        style = ' style="background:#fff2df"' if bad else ""
        out.append(f"<tr{style}><td>{_e(path)}</td><td>{_e(row.get('requested'))}</td>"
                   f"<td>{_e(row.get('attempted'))}</td><td>{_e(row.get('completed'))}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _files() -> str:
    links = ["history.jsonl", "results.json", "junit.xml", "test.yaml", "logs/"]
    return ('<h2 id="files">Files</h2><p>' + " &middot; ".join(f'<a href="{x}">{x}</a>' for x in links)
            + "</p>")
