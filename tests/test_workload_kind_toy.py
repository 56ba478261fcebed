"""A third workload kind plugs into ``chaos run`` without an edit to the runner
(issue 32): a toy kind defined only here, listed in ``WORKLOADS`` for the test,
runs through the real ``Run`` against a real SQLite backend, with real worker
host processes; the runner asks it every question of
``chaos.workload_kinds.base`` and takes its phases, final phase and verdict."""

from __future__ import annotations

import inspect
import json

import pytest

from chaos import runner
from chaos.runner import Run, RunConfig
from chaos.workload_kinds import WORKLOADS
from chaos.workload_kinds.base import WorkloadKind
from workloads.items import mint_item_id, mint_namespace
from workloads.random import Stream

READS = 12


class ToyWorld:
    def __init__(self, seed: int):
        self.namespace, s = mint_namespace(Stream(seed, ("toy",)))
        self.item, _ = mint_item_id(s)


class ToyKind(WorkloadKind):
    """Reads one never-claimed tuple: every definite reply must say it is free."""

    name = "toy"
    protocol = "work-claim"

    def __init__(self):
        self.asked: list[str] = []

    def prepare(self, cfg, abilities, notes):
        self.asked.append("prepare")
        assert abilities.has("kill")   # the backend's abilities, as the runner resolved them

    def build(self, cfg):
        self.asked.append("build")
        world = ToyWorld(cfg.seed)
        read = {"f": "read", "value": {"ledger_namespace": world.namespace, "item_id": world.item}}
        return [dict(read) for _ in range(READS)], world

    def target(self, cfg, run, note_pid, note_dir):
        self.asked.append("target")
        from chaos import sut

        return sut.get(cfg.backend, runs=True).target(cfg, run, note_pid, note_dir)

    def namespaces(self, world):
        return [world.namespace]

    def adapt(self, cfg, target, run, world, notes):
        self.asked.append("adapt")
        notes.append("toy: adapted to the target")
        return None

    def notes(self, ops, cfg):
        self.asked.append("notes")
        return [f"toy: {sum(1 for o in ops if o.get('type') == 'invoke' and o.get('f') == 'read')} reads sent"]

    def final_phase(self, cfg, world, history, call):
        self.asked.append("final_phase")
        call([{"f": "capabilities", "value": {}}])

    def ctx(self, cfg, world, capabilities):
        return {"backend": cfg.backend, "workload": cfg.workload, "tuple": [world.namespace, world.item]}

    def check(self, history, ctx):
        self.asked.append("check")
        reads = [o for o in history if o.get("f") == "read" and o.get("type") == "ok"]
        held = [o for o in reads if ((o.get("value") or {}).get("envelope") or {}).get("result", {})
                .get("read_back", {}).get("active") is not None]
        toy = {"valid": bool(reads) and not held, "reads_ok": len(reads)}
        return {"valid": toy["valid"], "checkers": {"toy_reads_free": toy}}


@pytest.fixture
def toy(monkeypatch):
    kind = ToyKind()
    monkeypatch.setitem(WORKLOADS, "toy", lambda: kind)
    return kind


def test_the_runner_names_no_workload():
    source = inspect.getsource(runner.Run)
    assert [name for name in WORKLOADS if f'"{name}"' in source] == []


def test_a_toy_workload_kind_runs_through_the_real_runner(tmp_path, toy):
    cfg = RunConfig(name="toy", backend="sqlite", workload="toy", nemesis=[], workers=2, time_limit=2.0, seed=3,
                    store=str(tmp_path), scale=1.0)
    code = Run(cfg, report=False).execute()
    results = json.loads(_only_results(tmp_path))
    assert code == 0 and results["verdict"] == "valid", results["notes"]
    assert results["test"]["workload"] == "toy" and set(results["checkers"]) == {"toy_reads_free"}
    assert results["checkers"]["toy_reads_free"]["reads_ok"] == READS
    assert "toy: adapted to the target" in results["notes"] and f"toy: {READS} reads sent" in results["notes"]
    # (the first build plans schedule.jsonl before the run begins)
    assert toy.asked == ["build", "prepare", "build", "target", "adapt", "notes", "final_phase", "check"]
    history = [json.loads(line) for line in _history(tmp_path).splitlines()]
    final = [o for o in history if o.get("f") == "capabilities" and o.get("type") == "ok"]
    assert len(final) == 1   # the toy's own final phase, and no claims read-back
    assert not [o for o in history if o.get("f") in ("publication-read", "commit", "verify")]


def _only_results(root) -> str:
    (path,) = root.rglob("results.json")
    return path.read_text()


def _history(root) -> str:
    (path,) = root.rglob("history.jsonl")
    return path.read_text()
