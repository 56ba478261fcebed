"""Type-strict structural comparison, the readable diff and the §11.12 rules."""

from __future__ import annotations

import copy

from hypothesis import given, strategies as st

from chaos.conform.adapters.base import Profile
from chaos.conform.compare import compare_final, prepare_durable, prepare_transcript
from chaos.conform.diff import diff, strict_equal

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


def test_type_strict_scalars():
    assert diff(True, 1) == ["(root): expected boolean true, got integer 1"]
    assert not strict_equal(1, 1.0)
    assert not strict_equal({"a": [0]}, {"a": [False]})
    assert strict_equal({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    assert not strict_equal([1, 2], [2, 1])


def test_diff_names_the_json_path():
    exp = [{"stdout": {"error": {"details": {"reason": "owner-mismatch"}}}}]
    act = [{"stdout": {"error": {"details": {"reason": "epoch-mismatch"}}}}]
    assert diff(exp, act, "transcript") == [
        'transcript[0].stdout.error.details.reason: expected "owner-mismatch", got "epoch-mismatch"']
    assert diff({"a": 1}, {"b": 1}) == ["a: expected 1, got (absent)", "b: expected (absent), got 1"]
    assert diff([1], [1, 2], "x") == ["x: expected 1 elements, got 2 (first extra: 2)"]


@given(json_values)
def test_a_value_equals_its_copy_and_its_key_reordering(value):
    def reorder(v):
        if isinstance(v, dict):
            return {k: reorder(v[k]) for k in reversed(list(v))}
        if isinstance(v, list):
            return [reorder(x) for x in v]
        return v
    assert diff(value, copy.deepcopy(value)) == []
    assert diff(value, reorder(value)) == []


@given(json_values)
def test_bool_for_int_is_always_a_mismatch(value):
    swapped = {"v": value, "flag": True}
    assert diff(swapped, {"v": value, "flag": 1})


NS, ITEM = "wbns_" + "1" * 32, "wb_01Q4837BM01W70T30B184GG1R6"


def durable(claims=(), outcomes=(), ledgers=()):
    return {"clock_floors": [], "claims": list(claims), "ledgers": list(ledgers),
            "publication_outcomes": list(outcomes)}


def test_zero_claims_dropped_and_records_sorted():
    zero = {"ledger_namespace": NS, "item_id": ITEM, "last_epoch": "0", "active": None}
    a = {"ledger_namespace": NS, "item_id": "wb_A", "last_epoch": "1", "active": None}
    b = {"ledger_namespace": NS, "item_id": "wb_B", "last_epoch": "2", "active": None}
    exp, act, problems, _ = prepare_durable(durable([zero, b, a]), durable([a, b]), Profile("x"))
    assert diff(exp, act) == [] and problems == []
    # a zero claim with a non-null active is NOT an untouched record
    live = dict(zero, active={"owner_id": "o"})
    exp, act, _, _ = prepare_durable(durable([live]), durable([]), Profile("x"))
    assert diff(exp, act)


def test_outcome_request_and_commit_order_rules():
    o1 = {"operation_id": "op1", "ledger_namespace": NS, "item_id": ITEM, "request": {"r": 1},
          "operation_digest": "sha256:1", "envelope": {"exit": 0, "stdout": {}}}
    o2 = dict(o1, operation_id="op0")
    bare = [{k: v for k, v in o.items() if k != "request"} for o in (o1, o2)]
    exp, act, problems, notes = prepare_durable(durable(outcomes=[o1, o2]), durable(outcomes=bare),
                                                Profile("x", exports_requests=False))
    assert diff(exp, act) == [] and problems == [] and notes
    exp, act, problems, _ = prepare_durable(durable(outcomes=[o1, o2]), durable(outcomes=[o2, o1]),
                                            Profile("x", commit_sequence=True))
    assert diff(exp, act) == [] and problems and "commit order" in problems[0]
    # a backend that exports requests must export the right ones
    wrong = [dict(o1, request={"r": 2}), o2]
    exp, act, _, _ = prepare_durable(durable(outcomes=[o1, o2]), durable(outcomes=wrong), Profile("x"))
    assert diff(exp, act, "d") == ["d.publication_outcomes[1].request.r: expected 1, got 2"]


def test_capabilities_name_substitution_only_touches_that_name():
    actions = [{"operation": "work-claim.capabilities", "request": {}}]
    expected = [{"exit": 0, "stdout": {"result": {"backend": {"name": "reference-backend", "x": 1}}}}]
    actual = [{"exit": 0, "stdout": {"result": {"backend": {"name": "sqlite-strict-fenced", "x": 1}}}}]
    exp, act, notes = prepare_transcript(actions, expected, actual, Profile("sqlite-strict-fenced"))
    assert diff(exp, act) == [] and notes
    assert expected[0]["stdout"]["result"]["backend"]["name"] == "reference-backend"  # copy, not in place
    actual[0]["stdout"]["result"]["backend"]["x"] = 2
    exp, act, _ = prepare_transcript(actions, expected, actual, Profile("sqlite-strict-fenced"))
    assert diff(exp, act, "transcript") == ["transcript[0].stdout.result.backend.x: expected 1, got 2"]


def test_bookkeeping_is_compared_too():
    final = {"backend": {"name": "n"}, "faults": {"claim-response-loss": False}, "durable": durable(),
             "process": {"preflights": []}}
    actual = copy.deepcopy(final)
    actual["faults"]["claim-response-loss"] = True
    lines, _ = compare_final(final, actual, Profile("x"))
    assert lines == ['final.faults.claim-response-loss: expected false, got true']
