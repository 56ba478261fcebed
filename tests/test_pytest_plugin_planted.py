"""The planted-bug backends (chaos.testing.planted) and the pytest plugin.

The engine-level tests prove each planted bug is real (and that the correct
backend refuses the same request); the pytester tests run real ``chaos run``s
through the ``chaos_run`` fixture: the gate FAILS with the checkers'
explanation against the planted bug and PASSES against the correct backend.
"""

from __future__ import annotations

import importlib.util

import pytest

from backends.api import FixedClock, Hooks
from backends.registry import open_backend
from chaos.commands.test_all import RunOutcome, RunRequest
from chaos.pytest_plugin import failure_message

pytest_plugins = ["pytester"]

NS = "wbns_" + "1" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = 1_894_352_400_000
HAVE_RUN = importlib.util.find_spec("chaos.commands.run") is not None


def _acquire(owner: str, last_epoch: int, active):
    return {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner, "lease_duration_ms": 60_000,
            "expected": {"last_epoch": str(last_epoch), "active": active}}


def _takeover(spec: dict):
    backend = open_backend(spec, FixedClock(T0), Hooks())
    try:
        first = backend.call("acquire", _acquire("agent-a", 0, None))
        assert first.exit == 0
        claim = first.envelope["result"]["claim"]
        return backend.call("acquire", _acquire("agent-b", 1, claim))  # the lease is live (60 s)
    finally:
        backend.close()


def test_planted_takeover_is_a_real_bug_and_sqlite_refuses_it(tmp_path):
    correct = _takeover({"backend": "sqlite", "path": str(tmp_path / "a.db"), "namespaces": [NS]})
    assert correct.exit != 0 and correct.envelope["error"]["code"] == "claim-held"
    planted = _takeover({"backend": "python", "factory": "chaos.testing.planted:open_takeover",
                         "path": str(tmp_path / "b.db"), "namespaces": [NS]})
    assert planted.exit == 0 and planted.envelope["result"]["claim"]["owner_id"] == "agent-b"


def test_failure_message_has_explanations_and_reproduce_command():
    o = RunOutcome(RunRequest(backend="python", factory="m:f", seed=4), 1, "/s/r", {
        "verdict": "invalid", "test": {"command": "chaos run --seed 4"},
        "checkers": {"dual_ownership": {"valid": False, "anomalies": [
            {"type": "dual-ownership", "explanation": "two owners at once", "ops": [3, 9]}]}}}, 2.0)
    msg = failure_message(o)
    assert "INVALID" in msg and "two owners at once" in msg and "reproduce: chaos run --seed 4" in msg
    assert "/s/r/report.html" in msg


def test_options_and_marker_are_registered(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.chaos(backend="postgres", seed=5)
        def test_defaults(request):
            assert request.config.getoption("--chaos-backend") == "reference"
            assert request.node.get_closest_marker("chaos").kwargs == {"backend": "postgres", "seed": 5}
    """)
    result = pytester.runpytest("--chaos-backend", "reference", "--strict-markers")
    result.assert_outcomes(passed=1)


GATE = """
def test_gate(chaos_run):
    outcome = chaos_run(backend={backend!r}, factory={factory!r}, nemesis=[], time_limit=4, seed=3, workers=4)
    assert outcome.verdict == "valid"
"""


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RUN, reason="chaos run (chaos.commands.run) is not available in this build yet")
def test_gate_fails_on_planted_bug_and_passes_on_sqlite(pytester):
    pytester.makepyfile(test_planted=GATE.format(backend="python", factory="chaos.testing.planted:open_takeover"),
                        test_correct=GATE.format(backend="sqlite", factory=None))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*chaos run INVALID*", "*[[]dual_ownership[]]*Two owners held the item at once*",
                                 "*reproduce: *--seed 3*"])
    out = result.stdout.str()
    assert "test_planted.py::test_gate" in out and "FAILED test_correct" not in out


def test_docs_example_backend_is_fenced_across_instances(tmp_path):
    """chaos.testing.filestore (the backend-authors.md example): two instances
    over one file behave as one coordinator (the second acquire is refused)."""
    spec = {"backend": "python", "factory": "chaos.testing.filestore:open_backend",
            "path": str(tmp_path / "state.json"), "namespaces": [NS]}
    a = open_backend(spec, FixedClock(T0), Hooks())
    b = open_backend(spec, FixedClock(T0), Hooks())
    first = a.call("acquire", _acquire("agent-a", 0, None))
    assert first.exit == 0
    second = b.call("acquire", _acquire("agent-b", 1, first.envelope["result"]["claim"]))
    assert second.envelope["error"]["code"] == "claim-held"
    assert b.call("capabilities", {}).envelope["result"]["operations"]["work_claim"]["mode"] == "fenced"


MARKED = """
import pytest

@pytest.mark.chaos(backend="python", factory="chaos.testing.planted:open_takeover", nemesis=[], time_limit=4,
                   seed=3, workers=4)
def test_marked_gate(chaos_result):
    raise AssertionError("the body of a test whose run was invalid must not run")
"""


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RUN, reason="chaos run (chaos.commands.run) is not available in this build yet")
def test_an_invalid_run_of_chaos_result_is_a_test_failure_not_a_setup_error(pytester):
    """CI dashboards count an error at setup as a broken fixture; an invalid backend is a failed test."""
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(["*chaos run INVALID*", "*reproduce: *--seed 3*"])
    assert "must not run" not in result.stdout.str()
