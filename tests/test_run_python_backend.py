"""`chaos run --backend python --factory MOD:FN`: the backend-author guide's
complete example (a JSON-file store under the shared engine) runs valid under
faults, and a store whose durable export reads process memory instead of the
file is caught by the durability checker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, factory: str) -> dict:
    store = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "run", "--backend", "python", "--factory", factory,
         "--nemesis", "kill,restart", "--time-limit", "6", "--workers", "3", "--seed", "5",
         "--store", str(store), "--name", "py"],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    results = json.loads((store / "latest" / "results.json").read_text())
    assert proc.returncode == results["exit_code"], proc.stderr
    return results


def test_the_guides_file_store_is_valid(tmp_path):
    results = _run(tmp_path, "chaos.testing.filestore:open_backend")
    assert results["verdict"] == "valid", results["notes"]
    assert results["test"]["backend"] == "python"


def test_an_export_that_forgets_the_file_is_caught(tmp_path):
    results = _run(tmp_path, "tests.forgetful_filestore:open_backend")
    assert results["verdict"] == "invalid"
    durability = results["checkers"]["durability"]
    assert durability["valid"] is False and durability["anomalies"]
