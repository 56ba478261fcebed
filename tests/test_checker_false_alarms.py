"""Programs that keep the contract in a way the suite was not written against
must be valid (issue #30, item 7): here a strict fenced CLI of our own (the
SQLite contract CLI) driven with one namespace per ledger, each ledger's
capabilities allowlist naming its own namespace only (contract §3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_fenced_cli_with_one_namespace_per_ledger_runs_valid(tmp_path):
    profile = yaml.safe_load((ROOT / "profiles" / "chaos-sqlite-blackbox.yaml").read_text())
    profile.update(name="sqlite-one-namespace-per-ledger", namespaces_per_ledger=1)
    path = tmp_path / "per-ledger.yaml"
    path.write_text(yaml.safe_dump(profile))
    store = tmp_path / "store"
    p = subprocess.run([PY, "-m", "chaos.cli", "run", "--store", str(store), "--backend", "external",
                        "--command", "python -m chaos.cli backend sqlite", "--profile", str(path),
                        "--nemesis", "none", "--workers", "2", "--time-limit", "4", "--seed", "4", "--scale", "1",
                        "--no-report"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    results = json.loads((store / "latest" / "results.json").read_text())
    ledger_of = results["ctx"]["ledger_of"]   # the checker's ledgers: by their path in the run dir
    assert len(set(ledger_of.values())) > 1, ledger_of
    assert all(not os.path.isabs(p) and (store / "latest" / p).exists() for p in ledger_of.values()), ledger_of
    honesty = results["checkers"]["capability_honesty"]
    assert honesty["valid"] is True, (honesty.get("anomalies"), p.stderr[-2000:])


@pytest.mark.slow
def test_a_git_journal_program_that_finalizes_only_what_head_holds_runs_valid(tmp_path):
    """Contract §6: claim-verify finalizes a publication when HEAD contains its revision; nothing says a
    publish must. Our Git-journal CLI, made to take "HEAD contains" literally and to finalize in claim-verify
    only (tests/headonly_gitjournal_cli.py), with several publications per hold on one item: each one's
    agent commits it and runs claim-verify, as the contract prescribes; a publication whose bytes a later
    commit replaced before any verify ran is not owed a finalization. (Before: the agent committed and
    published again without the verify, and git_finalization expected the next publish to finalize, as the
    shipped Wowbagger release happens to: publication-not-finalized on every superseded publication.)"""
    profile = yaml.safe_load((ROOT / "profiles" / "chaos-gitjournal.yaml").read_text())
    profile.update(name="headonly-gitjournal", backend_name=None, items={"path": "{item_id}.md", "commit": True})
    path = tmp_path / "headonly.yaml"
    path.write_text(yaml.safe_dump(profile))
    scenario = tmp_path / "one-item.yaml"
    scenario.write_text(yaml.safe_dump({"name": "one-item", "description": "several publications per hold",
                                        "claims": {"race_pairs": 0, "namespaces": 1, "items": 1,
                                                   "publishes": [3, 3], "work_ms": [50, 200]}}))
    store = tmp_path / "store"
    p = subprocess.run([PY, "-m", "chaos.cli", "run", "--store", str(store), "--backend", "external",
                        "--command", f"python {ROOT / 'tests' / 'headonly_gitjournal_cli.py'}", "--profile", str(path),
                        "--scenario", str(scenario), "--nemesis", "none", "--workers", "2", "--time-limit", "2",
                        "--seed", "2", "--no-report"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert (store / "latest" / "results.json").is_file(), (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    results = json.loads((store / "latest" / "results.json").read_text())
    history = [json.loads(line) for line in (store / "latest" / "history.jsonl").read_text().splitlines()]
    git = results["checkers"]["git_finalization"]
    assert git["valid"] is True, (git.get("anomalies"), p.stderr[-2000:])
    assert git["stats"]["committed"] >= 3   # several publications of one item were committed
    agent_verifies = [o for o in history if o["type"] == "invoke" and o.get("intent") == "agent:verify"]
    assert len(agent_verifies) >= git["stats"]["committed"] - 1
