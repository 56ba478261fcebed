"""Read one run directory for reporting, tolerating whatever a crash left.

A run killed mid-way may have no ``results.json``, a torn last history line,
or no history at all; the report must still be written and say so. Every
problem found while loading is kept in ``RunData.problems`` and shown. A
``results.json`` that departs from its schema (``results_schema``) keeps only
its well-typed members: the report shows the rest as problems instead of
tripping over them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from backends import safeload

from checkers.history import History

VERDICTS = ("valid", "invalid", "unknown")


@dataclass
class RunData:
    run_dir: str
    results: dict = field(default_factory=dict)
    history: History = field(default_factory=History)
    test: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)

    @property
    def test_info(self) -> dict:
        """``results.test`` merged over ``test.yaml`` (results win: they are what ran)."""
        info = {k: v for k, v in self.test.items() if not isinstance(v, (dict, list)) or k == "nemesis"}
        backend = self.test.get("backend")
        if isinstance(backend, dict):
            info["backend"] = backend.get("backend") or backend.get("name")
        info.update({k: v for k, v in (self.results.get("test") or {}).items() if v is not None})
        return info

    @property
    def name(self) -> str:
        return str(self.test_info.get("name") or os.path.basename(os.path.dirname(self.run_dir.rstrip("/"))) or "run")

    @property
    def verdict(self) -> str:
        """The run's verdict; a run without results is ``unknown`` (it proved nothing)."""
        v = self.results.get("verdict")
        if v in VERDICTS:
            return v
        legacy = self.results.get("valid")
        return {True: "valid", False: "invalid"}[legacy] if isinstance(legacy, bool) else "unknown"

    @property
    def command(self) -> str:
        cmd = self.test_info.get("command")
        if isinstance(cmd, list):
            return shlex.join(str(c) for c in cmd)
        return str(cmd) if cmd else ""

    @property
    def checkers(self) -> dict:
        c = self.results.get("checkers")
        return c if isinstance(c, dict) else {}


def load_run(run_dir: str) -> RunData:
    run = RunData(os.path.abspath(run_dir))
    results = _json(os.path.join(run_dir, "results.json"), run.problems)
    if isinstance(results, dict):
        run.results = well_typed(results, run.problems)
    elif results is False:
        pass
    elif results is None:
        run.problems.append("no results.json: the run did not finish (crashed or was killed)")
    test = _yaml(os.path.join(run_dir, "test.yaml"), run.problems)
    if isinstance(test, dict):
        from chaos.reports.results_schema import TEST

        spec = dict(TEST, backend=(True, (str, dict)))  # test.yaml may hold the backend's spec
        run.test = _keep(test, spec, "test.yaml: ", run.problems)
    run.history = _history(os.path.join(run_dir, "history.jsonl"), run.problems)
    return run


def _keep(obj: dict, spec: dict, where: str, problems: list) -> dict:
    """``obj`` without the members of ``spec`` whose type is wrong (each one a problem)."""
    out = dict(obj)
    for key, (_required, types, *_meaning) in spec.items():
        if key in out and (not isinstance(out[key], types) or (isinstance(out[key], bool) and bool not in types)):
            problems.append(f"{where}{key} has the wrong type ({type(out[key]).__name__}); ignored")
            del out[key]
    if isinstance(out.get("nemesis"), list) and not all(isinstance(n, str) for n in out["nemesis"]):
        problems.append(f"{where}nemesis is not a list of fault names; ignored")
        del out["nemesis"]
    return out


def well_typed(results: dict, problems: list) -> dict:
    """``results`` without the members whose type departs from schema 1 (each one a problem)."""
    from chaos.reports.results_schema import COVERAGE_ROW, STATS, TEST, TOP_LEVEL

    def keep(obj: dict, spec: dict, where: str) -> dict:
        return _keep(obj, spec, f"results.json: {where}", problems)

    clean = keep(results, TOP_LEVEL, "")
    if "test" in clean:
        clean["test"] = keep(clean["test"], TEST, "test.")
    if "stats" in clean:
        clean["stats"] = keep(clean["stats"], STATS, "stats.")
    for section, row_spec in (("checkers", None), ("fault_coverage", COVERAGE_ROW)):
        rows = clean.get(section)
        if isinstance(rows, dict):
            bad = [k for k, v in rows.items() if not isinstance(v, dict)]
            for k in bad:
                problems.append(f"results.json: {section}.{k} is not an object; ignored")
            clean[section] = {k: (keep(v, row_spec, f"{section}.{k}.") if row_spec else v)
                              for k, v in rows.items() if isinstance(v, dict)}
    notes = clean.get("notes")
    if isinstance(notes, list):
        clean["notes"] = [str(n) for n in notes]
    return clean


def _json(path: str, problems: list):
    if not os.path.lexists(path):
        return None
    try:
        return safeload.json_file(path, safeload.RESULTS, os.path.basename(path))
    except safeload.LoadError as e:
        problems.append(f"unreadable: {e}")
        return False


def _yaml(path: str, problems: list):
    if not os.path.lexists(path):
        return None
    try:
        return safeload.yaml_file(path, safeload.CONFIG, os.path.basename(path))
    except safeload.LoadError as e:
        problems.append(f"unreadable: {e}")
        return None


def _history(path: str, problems: list) -> History:
    """The history read once (``History.read``, tolerant; the bounded loader's
    rules): a torn tail or a corrupt line is reported, not fatal."""
    if not os.path.lexists(path):
        problems.append("no history.jsonl")
        return History()
    try:
        h = History.read(path, tolerant=True)
    except (OSError, safeload.LoadError) as e:
        problems.append(f"unreadable: {e}")
        return History()
    problems.extend(h.problems)
    return h
