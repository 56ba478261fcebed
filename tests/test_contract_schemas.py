"""Request schemas: exact members, types, canonical values, namespace binding,
and the exact messages / details of every refusal."""

from __future__ import annotations

import copy
import json

import pytest

from backends.contract.records import Reply
from backends.contract import (
    AcquireRequest, PublishRequest, RenewRequest, check_candidate, compact_json, parse_request,
)
from backends.contract.codes import MSG_NOT_CANONICAL_BASE64, MSG_NOT_STRICT_JSON, MSG_RETRY_INCOMPLETE
from backends.contract.digests import sha256_ref
from backends.contract.values import REQUEST_MAX_BYTES, encode_base64

NS = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
UNBOUND = "wbns_" + "3" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
BOUND = [NS, NS2]
ACTIVE = {"owner_id": "agent-a", "epoch": "3", "issued_at": "2030-01-11T09:00:00.000Z",
          "expires_at": "2030-01-11T09:01:00.000Z"}
CANDIDATE = b"---\nid: " + ITEM.encode() + b"\n---\n"

REQUESTS = {
    "capabilities": {},
    "read": {"ledger_namespace": NS, "item_id": ITEM},
    "legacy-create": {"ledger_namespace": NS, "item_id": ITEM},
    "legacy-transition": {"ledger_namespace": NS, "item_id": ITEM},
    "acquire": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-b", "lease_duration_ms": 60000,
                "expected": {"last_epoch": "3", "active": ACTIVE}},
    "renew": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-a", "epoch": "3",
              "expected_expires_at": "2030-01-11T09:01:00.000Z", "lease_duration_ms": 60000},
    "release": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-a", "epoch": "3",
                "expected_expires_at": "2030-01-11T09:01:00.000Z"},
    "publish": {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM,
                "expected_revision": "sha256:" + "a" * 64, "candidate_source_base64": encode_base64(CANDIDATE),
                "candidate_sha256": sha256_ref(CANDIDATE),
                "claim_fence": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-a", "epoch": "3"}},
    "publication-read": {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM},
}


def parse(op, doc):
    return parse_request(op, compact_json(doc) if not isinstance(doc, bytes) else doc, BOUND)


def pointer_of(reply):
    assert isinstance(reply, Reply), reply
    assert reply.exit == 2 and reply.envelope["error"]["code"] == "invalid-request"
    assert reply.envelope["state"] == "unchanged"
    return reply.envelope["error"]["details"]["pointer"]


@pytest.mark.parametrize("op", sorted(REQUESTS))
def test_valid_requests_parse(op):
    assert not isinstance(parse(op, REQUESTS[op]), Reply)


@pytest.mark.parametrize("op", sorted(REQUESTS))
def test_unknown_member_rejected(op):
    doc = dict(REQUESTS[op], extra=1)
    assert pointer_of(parse(op, doc)) == "/extra"


@pytest.mark.parametrize("op, member", [(op, m) for op in sorted(REQUESTS) if op != "publish"
                                        for m in REQUESTS[op]])
def test_each_missing_member_rejected(op, member):
    doc = {k: v for k, v in REQUESTS[op].items() if k != member}
    reply = parse(op, doc)
    assert pointer_of(reply) == "/" + member
    assert reply.envelope["error"]["message"].startswith("The request does not match ")
    assert "operation_id" not in reply.envelope


def test_publish_missing_member_is_the_incomplete_retry_message():
    for member in REQUESTS["publish"]:
        if member == "operation_id":
            continue
        doc = {k: v for k, v in REQUESTS["publish"].items() if k != member}
        reply = parse("publish", doc)
        assert pointer_of(reply) == "/" + member
        assert reply.envelope["error"]["message"] == MSG_RETRY_INCOMPLETE
    reply = parse("publish", {"operation_id": "pub_1"})
    assert reply.envelope["error"]["message"] == MSG_RETRY_INCOMPLETE
    assert reply.envelope["namespace"] == "ledger-publication"
    assert reply.envelope["command"] == "publish-claimed"


def test_publish_without_operation_id_is_a_schema_error():
    doc = {k: v for k, v in REQUESTS["publish"].items() if k != "operation_id"}
    reply = parse("publish", doc)
    assert pointer_of(reply) == "/operation_id"
    assert reply.envelope["error"]["message"] == "The request does not match publish-claimed version 1."


BAD_VALUES = [
    ("read", ["ledger_namespace"], "wbns_X"), ("read", ["item_id"], "wb_x"), ("read", ["item_id"], 5),
    ("acquire", ["owner_id"], "-bad"), ("acquire", ["lease_duration_ms"], 0),
    ("acquire", ["lease_duration_ms"], 86_400_001), ("acquire", ["lease_duration_ms"], True),
    ("acquire", ["lease_duration_ms"], 60000.0), ("acquire", ["expected", "last_epoch"], "01"),
    ("acquire", ["expected", "last_epoch"], "18446744073709551616"), ("acquire", ["expected", "last_epoch"], 3),
    ("acquire", ["expected", "active", "epoch"], "0"), ("acquire", ["expected", "active", "issued_at"],
                                                        "2030-02-30T00:00:00.000Z"),
    ("acquire", ["expected", "active"], "x"), ("acquire", ["expected", "active"], []),
    ("acquire", ["expected"], None),
    ("renew", ["epoch"], "0"), ("renew", ["expected_expires_at"], "2030-01-11T09:01:00Z"),
    ("renew", ["lease_duration_ms"], "60000"), ("release", ["epoch"], "18446744073709551616"),
    ("publish", ["operation_id"], "pub/1"), ("publish", ["expected_revision"], "sha256:" + "A" * 64),
    ("publish", ["candidate_sha256"], "sha256:abc"), ("publish", ["candidate_source_base64"], None),
    ("publish", ["claim_fence", "epoch"], "0"), ("publish", ["claim_fence", "ledger_namespace"], "x"),
    ("publish", ["claim_fence"], "x"), ("publication-read", ["operation_id"], ""),
]


@pytest.mark.parametrize("op, path, value", BAD_VALUES)
def test_bad_values_rejected_with_pointer(op, path, value):
    doc = copy.deepcopy(REQUESTS[op])
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert pointer_of(parse(op, doc)) == "/" + "/".join(path)


def test_acquire_expected_active_exact_members():
    doc = copy.deepcopy(REQUESTS["acquire"])
    doc["expected"]["active"]["extra"] = "x"
    assert pointer_of(parse("acquire", doc)) == "/expected/active/extra"
    doc = copy.deepcopy(REQUESTS["acquire"])
    doc["expected"]["active"] = None
    parsed = parse("acquire", doc)
    assert isinstance(parsed, AcquireRequest) and parsed.expected_active is None


def test_top_level_must_be_object():
    assert pointer_of(parse("read", b"[]")) == ""
    assert pointer_of(parse("capabilities", b"null")) == ""
    assert pointer_of(parse("capabilities", b'{"a":1}')) == "/a"


@pytest.mark.parametrize("raw", [b'{"ledger_namespace":"x","ledger_namespace":"y"}', b"{", b'{"a":NaN}',
                                 b'{"a":"\xff"}', b"{} {}"])
def test_not_strict_json(raw):
    reply = parse("read", raw)
    pointer_of(reply)
    assert reply.envelope["error"]["message"] == MSG_NOT_STRICT_JSON


def test_duplicate_member_pointer_in_details():
    reply = parse("acquire", b'{"expected":{"active":null,"active":null}}')
    assert pointer_of(reply) == "/expected/active"


def test_oversized_request_rejected_before_parsing():
    raw = b" " * (REQUEST_MAX_BYTES + 1)
    reply = parse("publish", raw)
    assert pointer_of(reply) == ""


@pytest.mark.parametrize("op", ["read", "acquire", "renew", "release", "legacy-create", "legacy-transition",
                                "publication-read"])
def test_unbound_namespace_details_name_the_tuple(op):
    doc = dict(REQUESTS[op], ledger_namespace=UNBOUND)
    reply = parse(op, doc)
    assert reply.exit == 2
    err = reply.envelope["error"]
    assert err["code"] == "ledger-namespace-unbound"
    assert err["message"] == "The ledger namespace is not provisioned for this endpoint."
    assert err["details"] == {"ledger_namespace": UNBOUND, "item_id": ITEM}
    assert ("operation_id" in reply.envelope) == (op == "publication-read")


def test_publish_unbound_namespace_details_name_only_the_namespace():
    doc = dict(REQUESTS["publish"], ledger_namespace=UNBOUND)
    reply = parse("publish", doc)
    assert reply.envelope["error"]["details"] == {"ledger_namespace": UNBOUND}
    assert reply.envelope["operation_id"] == "pub_1"


def test_publish_binding_precedes_base64_check():
    # the model's precedence (vectors.md 13.1): binding before base64
    doc = dict(REQUESTS["publish"], ledger_namespace=UNBOUND, candidate_source_base64="!!")
    assert parse("publish", doc).envelope["error"]["code"] == "ledger-namespace-unbound"


def test_typed_requests_carry_ints():
    renew = parse("renew", REQUESTS["renew"])
    assert isinstance(renew, RenewRequest) and renew.epoch == 3 and renew.lease_duration_ms == 60000
    release = parse("release", REQUESTS["release"])
    assert release.lease_duration_ms is None
    pub = parse("publish", REQUESTS["publish"])
    assert isinstance(pub, PublishRequest) and pub.fence_epoch == 3 and pub.raw == REQUESTS["publish"]


def _pub(**changes) -> PublishRequest:
    parsed = parse("publish", dict(REQUESTS["publish"], **changes))
    assert isinstance(parsed, PublishRequest)
    return parsed


def test_check_candidate_accepts_and_returns_bytes():
    assert check_candidate(_pub()) == CANDIDATE


@pytest.mark.parametrize("b64", ["YR==", "YWI", "YW Jj", encode_base64(CANDIDATE) + "\n"])
def test_check_candidate_non_canonical_base64(b64):
    reply = check_candidate(_pub(candidate_source_base64=b64))
    assert reply.exit == 2 and reply.envelope["error"]["message"] == MSG_NOT_CANONICAL_BASE64
    assert reply.envelope["error"]["details"] == {"field": "candidate_source_base64"}
    assert reply.envelope["operation_id"] == "pub_1"


def test_check_candidate_size_bound():
    big = b"a" * (8_388_608 + 1)
    reply = check_candidate(_pub(candidate_source_base64=encode_base64(big), candidate_sha256=sha256_ref(big)))
    assert reply.envelope["error"]["message"] == MSG_NOT_CANONICAL_BASE64
    ok = b"a" * 8_388_608
    assert check_candidate(_pub(candidate_source_base64=encode_base64(ok), candidate_sha256=sha256_ref(ok))) == ok


def test_check_candidate_digest_mismatch():
    reply = check_candidate(_pub(candidate_sha256="sha256:" + "0" * 64))
    assert reply.exit == 2
    assert reply.envelope["error"] == {
        "code": "candidate-digest-mismatch",
        "message": "The candidate digest does not match the candidate source.",
        "details": {"operation_id": "pub_1"}}


def test_request_bytes_not_reserialized():
    raw = json.dumps(REQUESTS["read"], indent=2).encode()
    assert not isinstance(parse("read", raw), Reply)


def test_empty_active_object_names_first_missing_member():
    doc = copy.deepcopy(REQUESTS["acquire"])
    doc["expected"]["active"] = {}
    assert pointer_of(parse("acquire", doc)) == "/expected/active/owner_id"
