"""``chaos conform --protocol issue-lock``: the vectors pass on every store, a
planted bug fails the vector that pins its rule, and bad vectors are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.errors import UsageError
from chaos.issuelock.conform import VECTORS_DIR, load_cases, match, run_issue_lock_conformance

ROOT = Path(__file__).resolve().parents[1]


def test_every_vector_names_the_spec_section_it_pins():
    cases = load_cases(VECTORS_DIR)
    assert len(cases) >= 14
    for c in cases:
        assert c["spec_section"] and c["description"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "gitfile"])
def test_the_vectors_pass_on_the_store(backend):
    report = run_issue_lock_conformance(backend)
    failed = {r.case: r.diff for r in report.results if r.status != "pass"}
    assert failed == {} and report.exit_code == 0


def test_the_vectors_pass_through_the_external_cli_convention():
    proc = subprocess.run([sys.executable, "-m", "chaos.cli", "conform", "--protocol", "issue-lock", "--backend",
                           "external", "--command", "chaos lock-backend gitfile", "--profile",
                           "profiles/issuelock-chaos-gitfile.yaml", "--case", "recovery-preserves-committed-work",
                           "--case", "lease-expiry-renewal-and-takeover", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["passed"] == 2


@pytest.mark.parametrize("bug,case", [("open_thin_bootstrap", "bootstrap-writes-the-canonical-lock"),
                                      ("open_recovery_username_only", "recovery-refusals"),
                                      ("open_heartbeat_ignores_session", "task-session-id-fences-heartbeats-and-writes")])
def test_a_planted_bug_fails_the_vector_that_pins_its_rule(bug, case):
    report = run_issue_lock_conformance("python", names=[case],
                                        options={"factory": f"chaos.testing.issuelock_bugs:{bug}"})
    assert [r.status for r in report.results] == ["fail"] and report.exit_code == 1


def test_matching_rules():
    assert match({"a": 1}, {"a": 1, "b": 2}) == []
    assert match({"a": "$absent"}, {"a": None}) != []
    assert match({"a": "$nonnull"}, {"a": None}) != []
    assert match({"a": {"$ne": 3}}, {"a": 3}) != []
    assert match([1, 2], [1, 2, 3]) != [] and match(True, 1) != []


def test_bad_vectors_are_refused(tmp_path):
    (tmp_path / "x.json").write_text('{"case": "y", "spec_section": "s", "seed": {}, "actions": [{"op": "heartbeat"}]}')
    with pytest.raises(UsageError):
        load_cases(tmp_path)
    (tmp_path / "x.json").write_text('{"case": "x", "case": "x"}')
    with pytest.raises(UsageError):
        load_cases(tmp_path)


def test_a_work_claim_backend_is_refused_for_the_issue_lock_protocol():
    proc = subprocess.run([sys.executable, "-m", "chaos.cli", "conform", "--protocol", "issue-lock", "--backend",
                           "postgres"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 254 and "does not serve the issue-lock protocol" in proc.stderr
