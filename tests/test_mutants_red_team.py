"""The red team catalogue: one planted bug per rule, each a real backend on
both paths (a Python class, and the same class behind the contract CLI), its
rule one of ``checkers.rules.RULES`` and the anomaly types that name it ones
the checkers emit; docs/mutants.md prints the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backends.api import FixedClock, Hooks
from backends.registry import open_backend
from checkers.rules import RULES
from chaos.testing.mutants import RED_TEAM, red_team_table

ROOT = Path(__file__).resolve().parents[1]
NS = "wbns_" + "e" * 32


def test_docs_print_the_red_team_table():
    assert red_team_table() in (ROOT / "docs" / "mutants.md").read_text()


def test_every_bug_breaks_a_tabled_rule_and_is_named_by_tabled_anomaly_types():
    rules = {r.id: r for r in RULES}
    every_type = {t for r in RULES for types in r.checks.values() for t in types}
    for bug in RED_TEAM.values():
        assert bug.rule in rules, bug.name
        own = {t for types in rules[bug.rule].checks.values() for t in types}
        assert set(bug.names) <= every_type, (bug.name, set(bug.names) - every_type)
        assert own & set(bug.names), (bug.name, "none of its names is its own rule's")
    # the §3-§8 MUSTs the checkers judge, each with at least one planted bug
    covered = {b.rule for b in RED_TEAM.values()}
    assert covered >= {r.id for r in RULES} - {"read-back-exact", "indeterminate-exact"}, \
        {r.id for r in RULES} - covered


@pytest.mark.parametrize("name", sorted(RED_TEAM))
def test_every_bug_opens_as_a_python_class(name, tmp_path):
    spec = {"backend": "python", "factory": RED_TEAM[name].factory, "path": str(tmp_path / "c.db"), "namespaces": [NS]}
    backend = open_backend(spec, FixedClock(1_894_352_400_000), Hooks())
    try:
        assert backend.call("capabilities", {}).exit == 0
    finally:
        backend.close()


def test_a_bug_runs_behind_the_contract_cli_as_a_black_box(tmp_path):
    bug = RED_TEAM["epoch-skips"]
    cli = [sys.executable, "-m", "chaos.cli", "backend", "python", "--factory", bug.factory]
    subprocess.run(cli + ["provision", "--ledger", str(tmp_path), "--namespace", NS], check=True, capture_output=True)
    item = "wb_01Q4837BM01W70T30B184GG1R6"

    def acquire(last: str, owner: str):
        req = {"ledger_namespace": NS, "item_id": item, "owner_id": owner, "lease_duration_ms": 1,
               "expected": {"last_epoch": last, "active": None}}
        p = subprocess.run(cli + ["claim", "acquire", "--ledger", str(tmp_path), "--input", "-", "--json"],
                           input=json.dumps(req).encode(), capture_output=True)
        return p.returncode, json.loads(p.stdout)

    code, env = acquire("0", "a")
    assert code == 0 and env["result"]["claim"]["epoch"] == "2"     # the planted bug: last_epoch + 2


def test_a_bug_that_counts_calls_shows_behind_the_cli_too(tmp_path):
    # a CLI starts one process per call: capabilities-flip keeps its count beside the store
    cli = [sys.executable, "-m", "chaos.cli", "backend", "python", "--factory", RED_TEAM["capabilities-flip"].factory]
    subprocess.run(cli + ["provision", "--ledger", str(tmp_path), "--namespace", NS], check=True, capture_output=True)
    ask = cli + ["claim", "capabilities", "--ledger", str(tmp_path), "--json"]
    first, second = (json.loads(subprocess.run(ask, capture_output=True, check=True).stdout) for _ in range(2))
    assert first != second


def test_the_final_phase_asks_the_capabilities_again(tmp_path):
    # 2 workers: no racer pair fits, so no episode asks the capabilities; the run's final
    # phase does, and the flip between set-up's envelope and that one is capabilities-changed
    store = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "run", "--backend", "python", "--factory",
         RED_TEAM["capabilities-flip"].factory, "--nemesis", "none", "--time-limit", "2", "--workers", "2",
         "--seed", "1", "--store", str(store), "--name", "flip"],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    results = json.loads((store / "latest" / "results.json").read_text())
    assert proc.returncode == results["exit_code"], proc.stderr
    asked = [json.loads(line) for line in (store / "latest" / "history.jsonl").read_text().splitlines()]
    asked = [r for r in asked if r.get("type") == "invoke" and r.get("f") == "capabilities"]
    assert len(asked) == 1 and "intent" not in asked[0]      # the final phase's, no racer's
    honesty = results["checkers"]["capability_honesty"]
    assert results["verdict"] == "invalid", results["notes"]
    assert "capabilities-changed" in {a["type"] for a in honesty["anomalies"]}
