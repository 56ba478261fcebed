"""``chaos conform --backend postgres``: the 18 vectors against a real
PostgreSQL server (one server for the run, one schema per case, a real
server crash for every restart). Skipped without PostgreSQL binaries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.conform.adapters.postgres import PostgresAdapter, PostgresSession
from chaos.conform.manifest import load_cases
from chaos.conform.runner import run_case
from chaos.faults.pgserver import find_bindir

VECTORS = Path(__file__).resolve().parents[1] / ".." / "shared" / "vectors" / "work-claims"

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries")]


@pytest.fixture(scope="module")
def session():
    s = PostgresSession({})
    yield s
    data_dir = s.server.dir
    s.close()
    assert not os.path.exists(data_dir) and not s.server.running()


@pytest.mark.slow
def test_all_eighteen_vectors_pass_against_a_real_server(session):
    results = [run_case(case, session.new_adapter()) for case in load_cases(VECTORS)]
    failing = {r.case: r.diff[:3] for r in results if r.status != "pass"}
    assert failing == {}
    assert len(results) == 18


def test_outcome_unknown_needs_the_real_connection_cut(session):
    class NoCut(PostgresAdapter):
        def arm_commit_fault(self) -> None:
            pass

    case = load_cases(VECTORS, ["publication-outcome-unknown"])[0]
    result = run_case(case, NoCut(session.server, {}))
    assert result.status == "fail"
    assert any(line.startswith("transcript[1].stdout") for line in result.diff)


def test_restart_is_a_real_server_crash(session):
    case = load_cases(VECTORS, ["renew-release-restart-aba"])[0]
    before = session.server.pid
    result = run_case(case, session.new_adapter())
    assert result.status == "pass"
    assert session.server.pid != before  # the postmaster was killed and started again
