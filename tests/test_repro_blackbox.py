"""``chaos repro`` for a black-box program: the script it writes shows a Wowbagger finding standalone.

The data is what ``chaos repro`` rendered a kept script from (``calls.json``) for a finding of a
deterministic Wowbagger run found by ``chaos explore`` (docs/explore.md); the test renders the
script again, runs it with the real program (no claim-chaos import in it: bash, gcc, git, python3's
standard library, node, libfaketime) and checks that it shows the finding, and that without the fault
the same calls do not.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from chaos.explore import blackbox

ROOT = Path(__file__).resolve().parents[1]
WOWBAGGER = ROOT / ".." / "shared" / "sut" / "wowbagger-0.1.0-alpha.7" / "bin" / "wowbagger.js"
DATA = ROOT / "tests" / "data" / "repro_blackbox"
needs_program = pytest.mark.skipif(not WOWBAGGER.exists() or not shutil.which("node") or not shutil.which("gcc"),
                                   reason="Wowbagger, node or gcc not here")


def _script(tmp_path: Path, name: str, without_fault: bool = False) -> Path:
    from chaos.faults.faketime import library_path

    data = json.loads((DATA / f"{name}.json").read_text())
    data["command"] = f"node {WOWBAGGER}"
    if without_fault:
        data = copy.deepcopy(data)
        for call in data["calls"]:
            call["fault"] = None
    return Path(blackbox._materialise(data, str(tmp_path / ("plain" if without_fault else "faulted")), library_path()))


@needs_program
def test_the_script_shows_the_finding_and_not_without_its_fault(tmp_path):
    """The F5 script, standalone: BROKEN (exit 1) with the rule in words; the same calls with the
    shim's fault removed: NOT SHOWN (exit 0), the faulted call's reply differs."""
    name = "F5-refused-acquire-took-effect"
    sh = _script(tmp_path, name)
    assert "claim_chaos" not in sh.read_text() and "import chaos" not in (sh.parent / "check.py").read_text()
    res = subprocess.run(["bash", str(sh)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"BROKEN ({name})" in res.stdout and "NOT as in the run" not in res.stdout, res.stdout
    # the rule, checked on the script's own replies: the refused acquire's claim is held
    assert "shown by these replies: acquire 1 by agent-p1 answered exit 6 state unchanged, yet read 2 shows " \
           "agent-p1 holding epoch 1" in res.stdout, res.stdout

    plain = subprocess.run(["bash", str(_script(tmp_path, name, without_fault=True))], capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert f"NOT SHOWN ({name})" in plain.stdout and "NOT as in the run" in plain.stdout, plain.stdout


def test_known_findings_are_listed_by_their_ids():
    """A finding the profile acknowledges is a finding of the run all the same, named by its id; the
    findings it caused (a deviation ``within`` it) come after the run's own."""
    results = {"checkers": {
        "durability": {"valid": True, "anomalies": [], "known": [
            {"type": "failed-acquire-took-effect", "ops": [3, 9], "known": {"id": "F5-refused-acquire-took-effect"}}]},
        "linearizable": {"valid": True, "anomalies": [], "known": [
            {"type": "nonlinearizable", "ops": [9], "known": {"id": "F5-nonlinearizable"}}]},
        "stale_write": {"valid": False, "anomalies": [{"type": "stale-fence-accepted", "ops": [20]}]}},
        "known_deviations": [{"id": "F5-refused-acquire-took-effect"},
                             {"id": "F5-nonlinearizable", "within": "F5-refused-acquire-took-effect"}]}
    assert [f for f, _, _ in blackbox.findings(results)] == [
        "F5-refused-acquire-took-effect", "stale_write-stale-fence-accepted", "F5-nonlinearizable"]
    from chaos.explore.seeds import known_names

    assert known_names(results) == ["F5-nonlinearizable (linearizable:nonlinearizable)",
                                    "F5-refused-acquire-took-effect (durability:failed-acquire-took-effect)"]

