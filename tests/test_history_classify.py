"""Classification by the contract's own words (checkers.history.CLASSIFICATION).

A reply that says ``state: "unchanged"`` is a definite ``fail``, exit 6
included; ``info`` only when the reply says the outcome is unknown, or there
is no coherent reply at all."""

from __future__ import annotations

import pytest

from backends.api import FixedClock
from backends.contract import Code, publication_error, surface_error
from backends.reference import open_backend
from checkers.history import CLASSIFICATION, FAIL, INFO, OK, classification_table, classify

NS, ITEM = "wbns_" + "1" * 32, "wb_01Q4837BM01W70T30B184GG1R6"


def _reply(op: str, code: str, details: dict):
    if op == "publish":
        return publication_error(code, details, operation_id="pub_1")
    return surface_error(op, code, details)


@pytest.mark.parametrize("op, code, details, expected", [
    # contract §4: "makes no claim or ledger change" - a definite answer
    ("acquire", Code.CLOCK_FLOOR_PERSISTENCE_FAILED, {"ledger_namespace": NS, "item_id": ITEM}, FAIL),
    ("publish", Code.CLOCK_FLOOR_PERSISTENCE_FAILED, {"ledger_namespace": NS, "item_id": ITEM}, FAIL),
    # contract §8: "no authoritative decision was possible and nothing changed"
    ("renew", Code.CLAIM_STORE_UNAVAILABLE, {"reason": "coordinator-unreachable"}, FAIL),
    ("acquire", Code.EPOCH_EXHAUSTED, {"ledger_namespace": NS, "item_id": ITEM}, FAIL),
    ("acquire", Code.CLAIM_HELD, {"ledger_namespace": NS, "item_id": ITEM}, FAIL),
    # contract §6, §8: the outcome could not be determined
    ("publish", Code.PUBLICATION_OUTCOME_UNKNOWN,
     {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM}, INFO),
])
def test_exit_6_is_classified_by_its_state(op, code, details, expected):
    reply = _reply(op, code, details)
    assert reply.exit in (4, 6)
    assert classify(reply.exit, reply.envelope) == expected


def test_the_real_engine_replies_classify_as_the_table_says():
    b = open_backend({"namespaces": [NS]}, FixedClock(1_894_352_400_000))
    caps = b.call("capabilities", {})
    read = b.call("read", {"ledger_namespace": NS, "item_id": ITEM})
    bad = b.call("read", {"ledger_namespace": NS})
    assert [classify(r.exit, r.envelope) for r in (caps, read, bad)] == [OK, OK, FAIL]


@pytest.mark.parametrize("exit_code, envelope", [
    (None, None), (0, None), (6, "text"), (True, {"ok": True, "state": "committed"}),
    (0, {"ok": False, "state": "unchanged"}),        # contradicts itself
    (4, {"ok": False, "state": "committed"}),        # contradicts itself
    (0, {"ok": True, "state": "unknown"}),           # a success whose outcome is unknown: contradicts itself
    (6, {"ok": False, "state": "unknown", "error": {"code": "publication-outcome-unknown"}}),
    (4, {"ok": False, "error": {"code": "claim-held"}}),  # no state: says nothing
])
def test_no_coherent_reply_is_info(exit_code, envelope):
    assert classify(exit_code, envelope) == INFO


def test_the_table_has_one_row_per_outcome_in_order():
    kinds = [k for _, k in CLASSIFICATION]
    assert kinds[:2] == [OK, FAIL] and set(kinds[2:]) == {INFO}


def test_docs_print_the_classification_table():
    """One table: docs/architecture.md prints ``CLASSIFICATION`` verbatim."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    assert classification_table() in doc
