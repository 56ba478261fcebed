"""``chaos conform`` end to end: all 18 vectors pass against the reference
oracle and the real SQLite backend; a one-byte change to an expectation, or a
disabled fault mechanism, makes the replay fail with a diff naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.conform.adapters.sqlite import SqliteAdapter
from chaos.conform.manifest import load_cases
from chaos.conform.runner import run_case

VECTORS = Path(__file__).resolve().parents[1] / ".." / "shared" / "vectors" / "work-claims"


def copy_vectors(dst: Path, cases: list[str]) -> Path:
    dst.mkdir(parents=True)
    for sub in ["ledger", *cases]:
        (dst / sub).mkdir()
        for f in (VECTORS / sub).iterdir():
            (dst / sub / f.name).write_bytes(f.read_bytes())
    return dst


def conform_json(capsys, *args: str) -> tuple[int, dict]:
    rc = main(["conform", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("backend", ["reference", "sqlite"])
def test_all_eighteen_vectors_pass(capsys, backend):
    rc, report = conform_json(capsys, "--backend", backend, "--vectors", str(VECTORS))
    failing = {c["case"]: c["diff"][:3] for c in report["cases"] if c["status"] != "pass"}
    assert failing == {}
    assert (rc, report["passed"], report["failed"], report["not_applicable"]) == (0, 18, 0, 0)


@pytest.mark.parametrize("backend", ["reference", "sqlite"])
def test_one_changed_expected_byte_fails_with_the_field_named(tmp_path, capsys, backend):
    root = copy_vectors(tmp_path / "v", ["paused-writer-commit-boundary"])
    manifest = root / "paused-writer-commit-boundary" / "manifest.json"
    text = manifest.read_text()
    assert text.count('"reason": "owner-mismatch"') == 2  # the reply and its stored outcome
    manifest.write_text(text.replace('"reason": "owner-mismatch"', '"reason": "owner-mismatcH"', 1))
    rc, report = conform_json(capsys, "--backend", backend, "--vectors", str(root))
    assert rc == 1 and report["failed"] == 1
    assert report["cases"][0]["diff"] == [
        'transcript[2].stdout.error.details.reason: expected "owner-mismatcH", got "owner-mismatch"']


def test_table_output_shows_the_diff(tmp_path, capsys):
    root = copy_vectors(tmp_path / "v", ["expiry-takeover"])
    manifest = root / "expiry-takeover" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"last_epoch": "2"', '"last_epoch": "3"', 1))
    rc = main(["conform", "--backend", "reference", "--vectors", str(root)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "expiry-takeover" in out and "fail" in out and 'expected "3", got "2"' in out


# --------------------------------------------------------------------------- the sqlite mechanisms are real


def _run_sqlite(case_name: str, adapter: SqliteAdapter):
    return run_case(load_cases(VECTORS, [case_name])[0], adapter)


def test_outcome_unknown_needs_the_real_fsync_failure():
    """Without arming the fsync shim the commit succeeds: the case must fail."""
    class NoShim(SqliteAdapter):
        def arm_commit_fault(self) -> None:
            pass

    result = _run_sqlite("publication-outcome-unknown", NoShim({}))
    assert result.status == "fail"
    assert any(line.startswith("transcript[1].stdout") for line in result.diff)


def test_floor_failure_needs_the_real_trigger():
    class NoTrigger(SqliteAdapter):
        def arm_sticky_fault(self, name: str) -> None:
            pass

    result = _run_sqlite("clock-floor-persistence-failure", NoTrigger({}))
    assert result.status == "fail" and any("final.durable.clock_floors" in line for line in result.diff)


def test_reply_loss_is_a_real_process_exit_after_commit():
    adapter = SqliteAdapter({})
    result = _run_sqlite("claim-response-loss-read", adapter)
    assert result.status == "pass"
    assert adapter.hosts_started == 2  # the first host died right after its commit


def test_capabilities_report_the_backends_own_name():
    result = _run_sqlite("capabilities-fenced", SqliteAdapter({}))
    assert result.status == "pass"
    assert result.transcript[0]["stdout"]["result"]["backend"]["name"] == "sqlite-strict-fenced"
    assert any("substituted" in note for note in result.notes)


# --------------------------------------------------------------------------- statuses


def test_unconfigurable_case_is_not_applicable_never_pass(tmp_path, capsys):
    root = copy_vectors(tmp_path / "v", ["capabilities-fenced"])
    manifest = root / "capabilities-fenced" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"legacy_create_v1": "reject-claimed-id"',
                                                     '"legacy_create_v1": "allow-anything"'))
    rc, report = conform_json(capsys, "--backend", "sqlite", "--vectors", str(root))
    assert (rc, report["passed"], report["not_applicable"]) == (2, 0, 1)  # nothing compared: not a pass
    assert "no case was applicable" in report["vacuous"]
    assert report["cases"][0]["status"] == "not-applicable"
    assert "legacy_create_v1" in report["cases"][0]["notes"][0]
    adapter = SqliteAdapter({})
    assert run_case(load_cases(root)[0], adapter).status == "not-applicable"
    assert not adapter.dir.exists()  # no temp dir left behind


def test_declared_substitution_is_reported_as_profile_substituted():
    from chaos.conform.adapters.reference import ReferenceAdapter

    class Substituting(ReferenceAdapter):
        def adjust_expected(self, case, expected):
            return ["declared: nothing really changed"]

    case = load_cases(VECTORS, ["expiry-takeover"])[0]
    assert run_case(case, Substituting()).status == "profile-substituted"


def test_harness_failure_is_a_failing_result_at_that_action():
    from chaos.conform.adapters.reference import ReferenceAdapter

    class Broken(ReferenceAdapter):
        def restart(self):
            raise RuntimeError("cannot restart")

    case = load_cases(VECTORS, ["renew-release-restart-aba"])[0]
    result = run_case(case, Broken())
    assert result.status == "fail"
    assert result.transcript[1] == {"error": "RuntimeError: cannot restart"}
    assert any(line.startswith("transcript[1]") for line in result.diff)
