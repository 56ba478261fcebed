"""chaos.reports.results_schema.validate_results."""

from __future__ import annotations

import copy

from chaos.reports.results_schema import SCHEMA_VERSION, validate_results
from chaos.testing.synthetic import results_for, synthetic_history

TEST = {"name": "t", "backend": "sqlite", "workload": "claims", "nemesis": ["kill"], "workers": 2,
        "time_limit": 3, "seed": 1, "command": ["chaos", "run"]}


def _good() -> dict:
    return results_for(synthetic_history(1, 2), TEST, "invalid", "/tmp/x")


def test_synthetic_results_conform():
    assert SCHEMA_VERSION == 1
    for verdict in ("valid", "invalid", "unknown"):
        assert validate_results(results_for(synthetic_history(1, 2), TEST, verdict, "/x")) == []


def test_each_departure_is_named_with_its_path():
    cases = [
        (lambda r: r.pop("verdict"), "verdict: missing"),
        (lambda r: r.update(verdict="maybe"), "not one of valid"),
        (lambda r: r.update(exit_code=0), "does not match verdict"),
        (lambda r: r["test"].update(seed="1"), "test.seed: expected int"),
        (lambda r: r["checkers"]["dual_ownership"].update(valid="yes"), "checkers.dual_ownership.valid"),
        (lambda r: r["checkers"]["dual_ownership"].update(anomalies=[]), "must carry at least one anomaly"),
        (lambda r: r["checkers"]["dual_ownership"]["anomalies"][0].update(ops=["a"]), "history indices"),
        (lambda r: r["fault_coverage"]["kill"].update(fired=True), "fault_coverage.kill.fired"),
        (lambda r: r["stats"].pop("ops"), "stats.ops: missing"),
        (lambda r: r.update(schema_version=2), "not supported"),
    ]
    for mutate, needle in cases:
        r = copy.deepcopy(_good())
        mutate(r)
        problems = validate_results(r)
        assert any(needle in p for p in problems), (needle, problems)
    assert validate_results([]) == ["results: expected an object, got list"]


def test_unknown_members_are_allowed():
    r = _good()
    r["future_member"] = {"anything": 1}
    assert validate_results(r) == []
