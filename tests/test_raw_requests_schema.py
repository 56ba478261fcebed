"""``checkers.raw.requests._schema_pointer`` is ``first_invalid_pointer``: the
fast proof of a well-formed request (no pointers built, rule verdicts
remembered) never says well formed where the schema finds a pointer, and
gives the schema's own pointer where it does not."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.contract.schemas import SCHEMAS, first_invalid_pointer
from checkers.raw import requests as raw_requests

NS, ITEM = "wbns_" + "ab" * 16, "wb_01Q474AK00N7J7ZS1PGZH9WGBF"
CLAIM = {"owner_id": "agent-p1", "epoch": "3", "issued_at": "2030-01-11T09:00:19.717Z",
         "expires_at": "2030-01-11T09:00:29.717Z"}
WELL_FORMED = {
    "read": {"ledger_namespace": NS, "item_id": ITEM},
    "acquire": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-p1", "lease_duration_ms": 10_000,
                "expected": {"last_epoch": "3", "active": CLAIM}},
    "renew": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-p1", "epoch": "3",
              "expected_expires_at": "2030-01-11T09:00:29.717Z", "lease_duration_ms": 10_000},
    "release": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-p1", "epoch": "3",
                "expected_expires_at": "2030-01-11T09:00:29.717Z"},
    "publish": {"operation_id": "pub_agent-p1_1", "ledger_namespace": NS, "item_id": ITEM,
                "expected_revision": "sha256:" + "0" * 64, "candidate_source_base64": "LS0tCg==",
                "candidate_sha256": "sha256:" + "1" * 64,
                "claim_fence": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-p1", "epoch": "3"}},
    "publication-read": {"operation_id": "pub_agent-p1_1", "ledger_namespace": NS, "item_id": ITEM},
}
ODD_VALUES = st.sampled_from([None, True, False, 0, 1, -1, 10_000, 86_400_001, 2**64, 2**64 - 1, 1.5, "", "0",
                              "01", "3", "18446744073709551616", "agent p1", "-agent", NS, ITEM, "x" * 129,
                              "2030-02-30T00:00:00.000Z", "2030-01-11T09:00:29.717Z", "sha256:" + "A" * 64,
                              [], {}, {"owner_id": "agent-p1"}, CLAIM])


def _paths(doc, prefix=()):
    for key, value in doc.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from _paths(value, prefix + (key,))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(WELL_FORMED)), st.data())
def test_the_fast_pointer_is_the_schemas_pointer(op, data):
    doc = copy.deepcopy(WELL_FORMED[op])
    for _ in range(data.draw(st.integers(0, 3))):
        paths = list(_paths(doc))
        where = data.draw(st.sampled_from(paths)) if paths else ()
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["set", "drop", "add"]))
        if action == "set" and where:
            parent[where[-1]] = copy.deepcopy(data.draw(ODD_VALUES))
        elif action == "drop" and where:
            del parent[where[-1]]
        else:
            key = data.draw(st.sampled_from(["extra", "owner_id", "epoch", "active"]))
            parent[key] = copy.deepcopy(data.draw(ODD_VALUES))
    for _ in range(2):  # the second time from remembered verdicts
        assert raw_requests._schema_pointer(op, doc) == first_invalid_pointer(op, doc), doc


def test_every_well_formed_example_is_well_formed():
    assert set(WELL_FORMED) <= set(SCHEMAS)
    for op, doc in WELL_FORMED.items():
        assert first_invalid_pointer(op, doc) is None and raw_requests._schema_pointer(op, doc) is None, op
