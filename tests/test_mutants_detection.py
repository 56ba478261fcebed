"""The suite catches real bugs: every mutant of ``chaos.testing.mutants`` is
flagged by at least one layer, by the cheapest reliable detection, with the
checker / vector naming the right invariant. These tests FAIL if detection
breaks (a mutant that passes is a regression of the suite, not of the
mutant). The full mutant x layer table is ``benchmarks/recipe_matrix.py``; the red team
under the default ``chaos run`` is ``benchmarks/mutant_matrix.py``.

Every chaos run here is a real ``chaos run`` (worker processes, real faults)
with a fixed seed and a scenario that forces the situation the bug needs.
"""

from __future__ import annotations

import importlib.util

import pytest

from backends.api import FixedClock, Hooks
from backends.registry import open_backend
from backends.sqlite import SqliteBackend
from chaos.testing.mutants import MUTANTS
from chaos.testing.mutants_detect import RECIPES, chaos, conform, detected_by, vectors_dir

NS = "wbns_" + "1" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = 1_894_352_400_000
CORRECT = "backends.sqlite:open_backend"

HAVE_VECTORS = vectors_dir().is_dir()
HAVE_RUN = importlib.util.find_spec("chaos.commands.run") is not None


def _faketime_ok() -> bool:
    try:
        from chaos.nemesis import mechanisms

        return mechanisms()["faketime"][0]
    except Exception:
        return False


# --------------------------------------------------------------------------- the mutants are real backends


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_opens_through_the_registry_as_a_fenced_sqlite_backend(name, tmp_path):
    spec = {"backend": "python", "factory": MUTANTS[name].factory, "path": str(tmp_path / "c.db"), "namespaces": [NS]}
    backend = open_backend(spec, FixedClock(T0), Hooks())
    try:
        assert isinstance(backend, SqliteBackend)
        caps = backend.call("capabilities", {}).envelope["result"]["operations"]["work_claim"]
        assert caps["mode"] == "fenced"  # every mutant *claims* to be correct
    finally:
        backend.close()


def _acquire(owner: str, last_epoch: int, active=None, lease_ms: int = 1_000):
    return {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner, "lease_duration_ms": lease_ms,
            "expected": {"last_epoch": str(last_epoch), "active": active}}


def test_lying_unchanged_reports_claim_held_for_an_acquire_it_committed(tmp_path):
    """Epochs 1 and 2 are honest; the acquire of epoch 3 commits, then says
    claim-held (state unchanged) - and a read shows the caller holds it."""
    spec = {"backend": "python", "factory": MUTANTS["lying-unchanged"].factory, "path": str(tmp_path / "c.db"),
            "namespaces": [NS]}
    clock = FixedClock(T0)
    backend = open_backend(spec, clock, Hooks())
    try:
        for epoch in (1, 2):
            clock.set(T0 + epoch * 10_000)  # the previous 1 s lease has expired
            active = backend.call("read", {"ledger_namespace": NS, "item_id": ITEM}).envelope["result"]["read_back"]
            assert backend.call("acquire", _acquire(f"a{epoch}", epoch - 1, active["active"])).exit == 0
        clock.set(T0 + 30_000)
        active = backend.call("read", {"ledger_namespace": NS, "item_id": ITEM}).envelope["result"]["read_back"]
        lie = backend.call("acquire", _acquire("a3", 2, active["active"]))
        assert lie.exit == 4 and lie.envelope["state"] == "unchanged" and lie.envelope["error"]["code"] == "claim-held"
        after = backend.call("read", {"ledger_namespace": NS, "item_id": ITEM}).envelope["result"]["read_back"]
        assert after["active"]["owner_id"] == "a3" and after["last_epoch"] == "3"
    finally:
        backend.close()


# --------------------------------------------------------------------------- layer 1: conformance vectors

#: mutant -> (vector case, a substring of one mismatch that names the broken rule)
CONFORM_DETECTIONS = {
    "no-fence-epoch": ("fence-dimension-rejections", "exit: expected 4, got 0"),
    "fence-owner-only": ("fence-dimension-rejections", "transcript[7].exit: expected 4, got 0"),
    "advisory-claims-fenced": ("advisory-unfenced", "work_claim.mode: expected \"advisory\", got \"fenced\""),
    "expiry-by-worker-clock": ("backward-clock-rejection-restart", "error.details.observed_at"),
    "floor-not-persisted-on-reject": ("backward-clock-rejection-restart", "final.durable.clock_floors[0].observed_at"),
    "epoch-reuse-after-restart": ("epoch-exhaustion", "error.code: expected \"epoch-exhausted\""),
    "non-idempotent-publish": ("publication-response-loss", "exit: expected 0, got 4"),
    "read-persists-floor": ("claim-response-loss-read", "final.durable.clock_floors[0].observed_at"),
}


@pytest.mark.skipif(not HAVE_VECTORS, reason="conformance vectors not found (../shared/vectors/work-claims)")
def test_the_python_factory_adapter_passes_the_correct_backend_on_the_same_cases():
    """The adapter itself adds no failure: the correct sqlite backend, served
    through the same python-factory path, passes every case used below."""
    cases = sorted({case for case, _ in CONFORM_DETECTIONS.values()})
    report = conform(CORRECT, cases)
    assert [(r.case, r.status) for r in report.results] == [(c, "pass") for c in cases], \
        [(r.case, r.diff[:3], r.notes[:2]) for r in report.results if r.status != "pass"]


@pytest.mark.skipif(not HAVE_VECTORS, reason="conformance vectors not found (../shared/vectors/work-claims)")
@pytest.mark.parametrize("name", sorted(CONFORM_DETECTIONS))
def test_conformance_flags_the_mutant(name):
    case, needle = CONFORM_DETECTIONS[name]
    (result,) = conform(MUTANTS[name].factory, [case]).results
    assert result.status == "fail", f"{name} passed vector {case}: conformance no longer detects it"
    assert any(needle in line for line in result.diff), result.diff[:6]


# --------------------------------------------------------------------------- layer 2: chaos run

#: mutant -> (recipe, {checker: anomaly types that name the broken invariant}[, seed])
CHAOS_DETECTIONS = {
    "no-fence-epoch": ("stale-writer", {"stale_write": {"stale-fence-accepted"}}),
    "advisory-claims-fenced": ("stale-writer", {"stale_write": {"stale-fence-accepted"},
                                                 "capability_honesty": {"fenced-but-unsafe"}}),
    "expiry-by-worker-clock": ("clock-regression", {"floors": {"decision-time-regressed"}}),
    "epoch-reuse-after-restart": ("restart-1worker", {"epochs": {"epoch-reallocated"}}),
    "lying-unchanged": ("plain", {"durability": {"failed-acquire-took-effect"}}),
    # a rejection's unpersisted time shows once time steps back: every lease-boundary probe (a
    # decision pinned at a future instant, the takeover at expires_at - 1 ms a rejection, first in
    # every rotation) is followed by an unpinned read, so a run without faults steps back for it
    "floor-not-persisted-on-reject": ("plain", {"floors": {"decision-time-regressed"}}),
    # the claims workload's careless-client knobs (ON by default at low rates) turned up to 1.0:
    # every publish is retried blindly (same operation_id, identical request) and every
    # re-acquire under the same owner first publishes with its stale epoch, so both situations
    # occur in every run rather than by timing
    "non-idempotent-publish": ("careless-client", {"idempotence": {"retry-not-replayed"}}, 2),
    "fence-owner-only": ("careless-client", {"stale_write": {"stale-fence-accepted"}}, 2),
}

@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RUN, reason="chaos run is not available in this build")
@pytest.mark.parametrize("name", sorted(CHAOS_DETECTIONS))
def test_chaos_run_flags_the_mutant_with_the_right_invariant(name, tmp_path):
    recipe, wanted, *seed = CHAOS_DETECTIONS[name]
    seed = seed[0] if seed else RECIPES[recipe].seed
    if recipe == "clock-regression" and not _faketime_ok():
        pytest.skip("libfaketime is not usable here")
    outcome = chaos(MUTANTS[name].factory, RECIPES[recipe], str(tmp_path / "store"), seed=seed)
    assert outcome.verdict == "invalid", (
        f"{name} under {recipe} (seed {seed}) was {outcome.verdict}: detection broke. "
        f"notes={outcome.results.get('notes')} output={outcome.output[-800:]}")
    found = detected_by(outcome)
    for checker, types in wanted.items():
        assert checker in found, f"{checker} did not flag {name}; flagged: {sorted(found)}"
        got = {a["type"] for a in found[checker]}
        assert got & types, f"{checker} flagged {name} as {got}, expected one of {types}"
        assert all(a["explanation"] and a["ops"] for a in found[checker] if a["type"] in types)


def test_every_mutant_has_a_pinned_detection_and_the_control_is_not_a_safety_claim():
    """Adding a mutant without a detection test fails here; the chaos
    detections agree with the catalogue."""
    assert set(MUTANTS) == set(CONFORM_DETECTIONS) | set(CHAOS_DETECTIONS)
    assert not MUTANTS["read-persists-floor"].safety and "read-persists-floor" not in CHAOS_DETECTIONS
    for name, (_recipe, wanted, *_seed) in CHAOS_DETECTIONS.items():
        assert set(wanted) <= set(MUTANTS[name].checkers), name
