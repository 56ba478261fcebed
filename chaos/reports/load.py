"""Read one run directory for reporting, tolerating whatever a crash left.

A run killed mid-way may have no ``results.json``, a torn last history line,
or no history at all; the report must still be written and say so. Every
problem found while loading is kept in ``RunData.problems`` and shown.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field

import yaml

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
        return {True: "valid", False: "invalid"}.get(legacy, "unknown")

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
        run.results = results
    elif results is None:
        run.problems.append("no results.json: the run did not finish (crashed or was killed)")
    test = _yaml(os.path.join(run_dir, "test.yaml"), run.problems)
    if isinstance(test, dict):
        run.test = test
    run.history = _history(os.path.join(run_dir, "history.jsonl"), run.problems)
    return run


def _json(path: str, problems: list):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        problems.append(f"{os.path.basename(path)} unreadable: {e}")
        return False


def _yaml(path: str, problems: list):
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{os.path.basename(path)} unreadable: {e}")
        return None


def _history(path: str, problems: list) -> History:
    """The history read once (``History.read``, tolerant): a torn tail or a
    corrupt line is reported, not fatal."""
    try:
        h = History.read(path, tolerant=True)
    except FileNotFoundError:
        problems.append("no history.jsonl")
        return History()
    except OSError as e:
        problems.append(f"history.jsonl unreadable: {e}")
        return History()
    problems.extend(h.problems)
    return h
