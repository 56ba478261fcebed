"""One campaign report for many runs, written while their results arrive.

A campaign directory holds ``runs.jsonl`` (one line per finished run, appended
as it finishes: backend, workload, nemeses, seed, verdict, findings, times, run
dir) and ``campaign.md``, the summary: per backend / workload / nemeses the
verdict counts, the findings, the seeds, and the time to first failure (the
campaign time at which the group's first ``invalid`` run finished, and its
seed). ``campaign.md`` is rewritten every few seconds while the campaign runs,
so a long one can be watched, and once more at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

REWRITE_EVERY_S = 5.0
VERDICT_ORDER = ("valid", "invalid", "unknown", "usage-error", "crashed")


@dataclass
class SeedRecord:
    """One finished run, as the campaign report keeps it (one line of runs.jsonl)."""

    backend: str
    workload: str
    nemeses: str              # "kill,pause" or "none"
    seed: int
    verdict: str
    exit_code: int
    findings: dict = field(default_factory=dict)   # "checker: anomaly type" -> count
    ops: int | None = None
    run_s: float = 0.0        # the run's own wall time
    done_at_s: float = 0.0    # campaign time at which its result arrived
    run_dir: str | None = None
    error: str | None = None  # why it crashed or has no run directory (the last line it printed, a lost worker)

    @property
    def group(self) -> tuple[str, str, str]:
        return self.backend, self.workload, self.nemeses


def findings_of(results: dict) -> dict:
    """``"checker: anomaly type" -> count`` over a results.json's checkers."""
    found = Counter()
    for name, r in (results.get("checkers") or {}).items():
        for a in (r.get("anomalies") or []) if isinstance(r, dict) else []:
            found[f"{name}: {a.get('type') if isinstance(a, dict) else a}"] += 1
    return dict(sorted(found.items()))


class CampaignReport:
    """Appends each run to ``runs.jsonl`` and keeps ``campaign.md`` current."""

    def __init__(self, directory: str, title: str, about: list[str], planned: int,
                 started: float | None = None, started_utc: str | None = None):
        """``started``: the campaign's ``time.monotonic()`` start, when it began before its first result."""
        self.directory, self.title, self.about, self.planned = directory, title, about, planned
        os.makedirs(directory, exist_ok=True)
        self.records: list[SeedRecord] = []
        self.started = time.monotonic() if started is None else started
        self.started_utc = started_utc or utc_now()
        self._written_at = 0.0
        self._jsonl = open(os.path.join(directory, "runs.jsonl"), "a", encoding="utf-8")
        self.summary_path = os.path.join(directory, "campaign.md")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def add(self, record: SeedRecord) -> None:
        self.records.append(record)
        self._jsonl.write(json.dumps(asdict(record), sort_keys=True) + "\n")
        self._jsonl.flush()
        if time.monotonic() - self._written_at >= REWRITE_EVERY_S:
            self.write_summary(final=False)

    def close(self, ending: str) -> str:
        """Write the final summary (``ending`` says how the campaign ended) and return its path."""
        self._jsonl.close()
        self.write_summary(final=True, ending=ending)
        return self.summary_path

    def write_summary(self, final: bool, ending: str = "") -> None:
        text = render(self, final, ending)
        tmp = self.summary_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, self.summary_path)
        self._written_at = time.monotonic()


def render(report: CampaignReport, final: bool, ending: str) -> str:
    records = report.records
    counts = Counter(r.verdict for r in records)
    state = f"finished ({ending})" if final else "running"
    lines = [f"# {report.title}", "",
             *[f"- {line}" for line in report.about],
             f"- started {report.started_utc}, {state}; {report.elapsed():.1f} s of campaign time",
             f"- runs: {len(records)} of {report.planned}: " + _counts(counts), "",
             "## By backend, workload and nemeses", "",
             "| backend | workload | nemeses | runs | " + " | ".join(VERDICT_ORDER)
             + " | findings | first failure | seeds |",
             "|---|---|---|---:|" + "---:|" * len(VERDICT_ORDER) + "---|---|---|"]
    groups: dict[tuple, list[SeedRecord]] = {}
    for r in records:
        groups.setdefault(r.group, []).append(r)
    for key, rows in groups.items():
        c = Counter(r.verdict for r in rows)
        found = Counter()
        for r in rows:
            found.update(r.findings)
        first = min((r for r in rows if r.verdict == "invalid"), key=lambda r: r.done_at_s, default=None)
        first_text = f"seed {first.seed} at {first.done_at_s:.1f} s" if first else "none"
        lines.append(f"| {' | '.join(key)} | {len(rows)} | " + " | ".join(str(c[v]) for v in VERDICT_ORDER)
                     + f" | {_findings(found)} | {first_text} | {_ranges(r.seed for r in rows)} |")
    bad = sorted((r for r in records if r.verdict != "valid"), key=lambda r: (r.group, r.seed))
    lines += ["", f"## Runs that were not valid ({len(bad)})", ""]
    if bad:
        lines += ["| backend | workload | nemeses | seed | verdict | findings | run s | done at s | run dir |",
                  "|---|---|---|---:|---|---|---:|---:|---|"]
        for r in bad:
            where = " ".join(x for x in (r.run_dir or "(no run dir)", f"({r.error})" if r.error else "") if x)
            lines.append(f"| {r.backend} | {r.workload} | {r.nemeses} | {r.seed} | {r.verdict} | "
                         f"{_findings(Counter(r.findings))} | {r.run_s:.1f} | {r.done_at_s:.1f} | {_cell(where)} |")
    else:
        lines.append("(none)")
    lines += ["", "Every run, one JSON object a line: runs.jsonl", ""]
    return "\n".join(lines)


def _counts(counts: Counter) -> str:
    return ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER if counts[v]) or "none yet"


def _findings(found: Counter) -> str:
    return "; ".join(f"{k} x{n}" for k, n in found.most_common(4)) + (" ..." if len(found) > 4 else "") or "-"


def _ranges(seeds) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    out, run = [], []
    for s in sorted(set(seeds)):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")[:300]


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
