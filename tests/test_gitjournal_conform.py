"""The conformance vectors against the Git-journal backend (hosted) and, as a
black box through ``backends.external``, against our own CLI for sqlite and
gitjournal. Subsets keep this fast; ``chaos conform`` runs all 18."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.conform.suite import run_conformance

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "work-claims"
PROFILES = Path(__file__).resolve().parents[1] / "profiles"
SUBSET = ["paused-writer-commit-boundary", "publication-outcome-unknown", "publication-response-loss",
          "clock-floor-persistence-failure", "advisory-publication-rejection", "capabilities-missing-write-path"]


def statuses(report) -> dict:
    return {r.case: r.status for r in report.results}


def test_gitjournal_passes_every_applicable_vector():
    report = run_conformance("gitjournal", VECTORS)
    st = statuses(report)
    assert report.exit_code == 0, [r.to_json() for r in report.results if r.status == "fail"]
    assert st["advisory-unfenced"] == st["capabilities-missing-write-path"] == "not-applicable"
    assert st["capabilities-fenced"] == st["publication-outcome-unknown"] == "profile-substituted"
    assert list(st.values()).count("pass") == 13


@pytest.mark.slow
def test_external_sqlite_cli_matches_the_in_process_sqlite_adapter():
    ext = run_conformance("external", VECTORS, SUBSET, {"command": "chaos backend sqlite"})
    direct = run_conformance("sqlite", VECTORS, SUBSET)
    assert statuses(ext) == statuses(direct)
    assert set(statuses(ext).values()) == {"pass"}


@pytest.mark.slow
def test_external_gitjournal_cli_matches_the_hosted_gitjournal_adapter():
    cases = SUBSET[:4]
    ext = run_conformance("external", VECTORS, cases, {"command": "chaos backend gitjournal",
                                                        "profile": str(PROFILES / "chaos-gitjournal.yaml")})
    direct = run_conformance("gitjournal", VECTORS, cases)
    assert statuses(ext) == statuses(direct)
    assert ext.exit_code == 0
