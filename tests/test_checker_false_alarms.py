"""Programs that keep the contract in a way the suite was not written against
must be valid (issue #30, item 7): here a strict fenced CLI of our own (the
SQLite contract CLI) driven with one namespace per ledger, each ledger's
capabilities allowlist naming its own namespace only (contract §3)."""

from __future__ import annotations

import json
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
    ledgers = set(results["target"]["spec"]["ledgers"].values())
    assert len(ledgers) > 1, results["target"]
    honesty = results["checkers"]["capability_honesty"]
    assert honesty["valid"] is True, (honesty.get("anomalies"), p.stderr[-2000:])
    assert results["ctx"]["ledger_of"] == results["target"]["spec"]["ledgers"]
