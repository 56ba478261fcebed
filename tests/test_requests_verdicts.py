"""The requests invariant validates identical candidate bytes once
(checkers/raw/requests.py): the cached verdict is the one the
validator gives, per item, and each finding owns its details."""

from __future__ import annotations

import base64
import hashlib

from backends.contract import ledger_invalid_details
from backends.contract.ledger_item import render_item
from checkers.raw import requests

ITEM = "wb_01Q4843R2AN6VQ7XKD3MP8RT2W"
OTHER = "wb_01Q4843R2AN6VQ7XKD3MP8RT2X"


NS = "wbns_" + "a" * 32


def publish_request(data: bytes, item: str) -> dict:
    """A well-formed request (a noncanonical one is judged before its candidate)."""
    return {"operation_id": "op-1", "ledger_namespace": NS, "item_id": item, "expected_revision": "sha256:" + "0" * 64,
            "candidate_source_base64": base64.b64encode(data).decode(),
            "candidate_sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
            "claim_fence": {"ledger_namespace": NS, "item_id": item, "owner_id": "agent-1", "epoch": "1"}}


def candidate(item: str, status: str = "in-progress") -> bytes:
    """ledger-item.md §6.1's valid item (with ``status`` and ``item``'s id)."""
    return render_item({"schema_version": 1, "id": item, "title": "Chart the fictional harbour approach",
                        "kind": "task", "status": status, "created": "2030-01-11", "updated": "2030-01-11",
                        "provenance": {"source": "generator/ledger-item", "recorded_at": "2030-01-11T09:15:30.250Z"},
                        "depends_on": []}, "\nSynthetic work item for publication tests.\n")


def test_same_bytes_other_item_gets_its_own_verdict():
    data = candidate(ITEM)
    assert requests.request_problems(0, {"ok": True}, publish_request(data, ITEM)) == []
    again = requests.request_problems(0, {"ok": True}, publish_request(data, OTHER))  # cached bytes, another item
    assert [kind for kind, _ in again] == ["invalid-candidate-accepted"]
    assert again[0][1]["issues"] == ledger_invalid_details(data, OTHER, b"")


def test_repeated_invalid_candidate_gives_equal_findings_with_their_own_details():
    data = candidate(ITEM, status="paused")
    first = requests.request_problems(0, {"ok": True}, publish_request(data, ITEM))
    second = requests.request_problems(0, {"ok": True}, publish_request(data, ITEM))
    assert first == second and first[0][0] == "invalid-candidate-accepted"
    assert first[0][1]["issues"] == ledger_invalid_details(data, ITEM, b"")
    assert first[0][1]["issues"] is not second[0][1]["issues"]


def test_the_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(requests, "_VERDICTS_MAX", 3)
    monkeypatch.setattr(requests, "_VERDICTS", {})
    for n in range(10):
        requests.request_problems(0, {"ok": True}, publish_request(candidate(ITEM) + b"x" * n, ITEM))
        assert len(requests._VERDICTS) <= 3
