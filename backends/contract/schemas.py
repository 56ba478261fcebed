"""Strict request parsing, one schema per public operation (contract §5, §6;
vectors.md §3.2, §8).

``parse_request(op, raw, namespaces)`` runs, in order: the request size bound,
strict unique-key UTF-8 JSON, the exact member set, types and canonical
values, then the namespace binding. It returns a typed request or a ready
error ``Reply`` (exit 2). Invalid-request ``details`` name the first invalid
JSON pointer: ``{"pointer": "/expected/active/epoch"}`` ("" = the whole
document).

Order inside the member check: unknown members (document order), then
missing members (schema order), then each value (schema order).

Publish is deliberately split (the model's precedence, vectors.md §13.1): the
schema step only requires ``candidate_source_base64`` to be a string; base64
canonicality, the size bound and the candidate digest are checked by
``check_candidate`` *after* the namespace binding, the stored-outcome lookup
and the capability check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from backends.contract.records import Active, Reply
from backends.contract import values as v
from backends.contract.codes import (
    MSG_NOT_CANONICAL_BASE64, MSG_NOT_STRICT_JSON, MSG_RETRY_INCOMPLETE, Code, schema_message,
)
from backends.contract.digests import sha256_ref
from backends.contract.envelopes import SURFACE, publication_error, surface_error
from backends.contract.jsonstrict import StrictJSONError, escape_pointer_token, loads_strict


# --------------------------------------------------------------------------- typed requests


@dataclass(frozen=True)
class TupleRequest:
    """read, publication-less tuple ops and the legacy stand-ins."""
    raw: dict
    ledger_namespace: str
    item_id: str


@dataclass(frozen=True)
class CapabilitiesRequest:
    raw: dict


@dataclass(frozen=True)
class AcquireRequest:
    raw: dict
    ledger_namespace: str
    item_id: str
    owner_id: str
    lease_duration_ms: int
    expected_last_epoch: int
    expected_active: Active | None


@dataclass(frozen=True)
class RenewRequest:
    """renew and release (``lease_duration_ms`` is None for release)."""
    raw: dict
    ledger_namespace: str
    item_id: str
    owner_id: str
    epoch: int
    expected_expires_at: int
    lease_duration_ms: int | None


@dataclass(frozen=True)
class PublishRequest:
    raw: dict
    operation_id: str
    ledger_namespace: str
    item_id: str
    expected_revision: str
    candidate_source_base64: str
    candidate_sha256: str
    fence_namespace: str
    fence_item_id: str
    fence_owner_id: str
    fence_epoch: int


@dataclass(frozen=True)
class PublicationReadRequest:
    raw: dict
    operation_id: str
    ledger_namespace: str
    item_id: str


# --------------------------------------------------------------------------- member rules


class _Invalid(Exception):
    def __init__(self, pointer: str, message: str | None = None):
        self.pointer = pointer
        self.message = message


Check = Callable[[object], bool]

_CLAIM = {"owner_id": v.is_owner_id, "epoch": lambda x: v.is_epoch(x, active=True),
          "issued_at": v.is_instant, "expires_at": v.is_instant}
_FENCE = {"ledger_namespace": v.is_namespace, "item_id": v.is_item_id, "owner_id": v.is_owner_id,
          "epoch": lambda x: v.is_epoch(x, active=True)}
_TUPLE = {"ledger_namespace": v.is_namespace, "item_id": v.is_item_id}
_ACTIVE_EPOCH: Check = lambda x: v.is_epoch(x, active=True)  # noqa: E731

SCHEMAS: dict[str, dict] = {
    "capabilities": {},
    "read": _TUPLE,
    "legacy-transition": _TUPLE,
    "legacy-create": _TUPLE,
    "acquire": {**_TUPLE, "owner_id": v.is_owner_id, "lease_duration_ms": v.is_lease_duration,
                "expected": {"last_epoch": v.is_epoch, "active": ("nullable", _CLAIM)}},
    "renew": {**_TUPLE, "owner_id": v.is_owner_id, "epoch": _ACTIVE_EPOCH,
              "expected_expires_at": v.is_instant, "lease_duration_ms": v.is_lease_duration},
    "release": {**_TUPLE, "owner_id": v.is_owner_id, "epoch": _ACTIVE_EPOCH,
                "expected_expires_at": v.is_instant},
    "publish": {"operation_id": v.is_operation_id, **_TUPLE, "expected_revision": v.is_sha256_ref,
                "candidate_source_base64": lambda x: isinstance(x, str),
                "candidate_sha256": v.is_sha256_ref, "claim_fence": _FENCE},
    "publication-read": {"operation_id": v.is_operation_id, **_TUPLE},
}


def _check_object(value: object, schema: dict, path: str) -> None:
    if not isinstance(value, dict):
        raise _Invalid(path)
    for key in value:
        if key not in schema:
            raise _Invalid(f"{path}/{escape_pointer_token(key)}")
    for key in schema:
        if key not in value:
            raise _Invalid(f"{path}/{escape_pointer_token(key)}")
    for key, rule in schema.items():
        _check_value(value[key], rule, f"{path}/{escape_pointer_token(key)}")


def _check_value(value: object, rule, path: str) -> None:
    if isinstance(rule, tuple) and rule[0] == "nullable":
        if value is not None:
            _check_value(value, rule[1], path)
    elif isinstance(rule, dict):
        _check_object(value, rule, path)
    elif not rule(value):
        raise _Invalid(path)


def first_invalid_pointer(op: str, doc: object) -> str | None:
    """The JSON pointer of the first member of a parsed ``op`` request that
    breaks its schema (unknown, missing, wrong type or noncanonical value: the
    ``details.pointer`` of the exit 2 ``invalid-request`` it must get), or None
    when the request is well formed. What a checker asks of a request the
    history shows was sent (``checkers.invariants.requests``)."""
    try:
        _check_object(doc, SCHEMAS[op], "")
    except _Invalid as bad:
        return bad.pointer
    return None


# --------------------------------------------------------------------------- entry point


def _invalid(op: str, pointer: str, message: str | None = None) -> Reply:
    namespace, command = SURFACE[op]
    return surface_error(op, Code.INVALID_REQUEST, {"pointer": pointer},
                         message=message or schema_message(namespace, command))


def _retry_incomplete(op: str, doc: object) -> Reply | None:
    """A publish body carrying its operation id but not the complete request."""
    schema = SCHEMAS["publish"]
    if op != "publish" or not isinstance(doc, dict) or "operation_id" not in doc:
        return None
    keys = set(doc)
    if not keys < set(schema):
        return None
    first_missing = next(k for k in schema if k not in keys)
    return _invalid(op, "/" + first_missing, MSG_RETRY_INCOMPLETE)


def decode_request(op: str, raw: bytes) -> object | Reply:
    """Size bound then strict JSON. Returns the document or an error Reply."""
    if len(raw) > v.REQUEST_MAX_BYTES:
        return _invalid(op, "")
    try:
        return loads_strict(raw)
    except StrictJSONError as exc:
        return _invalid(op, exc.pointer, MSG_NOT_STRICT_JSON)


def parse_request(op: str, raw: bytes, namespaces: list[str] | tuple[str, ...]):
    """Parse ``raw`` for public op ``op``: a typed request, or an error Reply."""
    if op not in SCHEMAS:
        raise ValueError(f"no request schema for operation {op!r}")
    doc = decode_request(op, raw)
    if isinstance(doc, Reply):
        return doc
    incomplete = _retry_incomplete(op, doc)
    if incomplete is not None:
        return incomplete
    try:
        _check_object(doc, SCHEMAS[op], "")
    except _Invalid as bad:
        return _invalid(op, bad.pointer, bad.message)
    assert isinstance(doc, dict)
    request = _build(op, doc)
    unbound = check_binding(op, request, namespaces)
    return unbound if unbound is not None else request


def check_binding(op: str, request, namespaces) -> Reply | None:
    """Namespace allowlist (contract §2). Details per vectors.md §8 and §13.2:
    publish names only the namespace; claim ops, legacy ops and publication
    read name the tuple. Publication replies echo ``operation_id``."""
    ns = getattr(request, "ledger_namespace", None)
    if ns is None or ns in namespaces:
        return None
    if op == "publish":
        return publication_error(Code.LEDGER_NAMESPACE_UNBOUND, {"ledger_namespace": ns},
                                 operation_id=request.operation_id)
    details = {"ledger_namespace": ns, "item_id": request.item_id}
    return surface_error(op, Code.LEDGER_NAMESPACE_UNBOUND, details,
                         operation_id=getattr(request, "operation_id", None))


def _build(op: str, d: dict):
    if op == "capabilities":
        return CapabilitiesRequest(d)
    if op in ("read", "legacy-transition", "legacy-create"):
        return TupleRequest(d, d["ledger_namespace"], d["item_id"])
    if op == "acquire":
        exp = d["expected"]
        active = exp["active"]
        return AcquireRequest(
            d, d["ledger_namespace"], d["item_id"], d["owner_id"], d["lease_duration_ms"],
            v.parse_epoch(exp["last_epoch"]),
            None if active is None else Active(active["owner_id"], v.parse_epoch(active["epoch"]),
                                               v.parse_instant(active["issued_at"]),
                                               v.parse_instant(active["expires_at"])))
    if op in ("renew", "release"):
        return RenewRequest(d, d["ledger_namespace"], d["item_id"], d["owner_id"],
                            v.parse_epoch(d["epoch"]), v.parse_instant(d["expected_expires_at"]),
                            d.get("lease_duration_ms"))
    if op == "publish":
        f = d["claim_fence"]
        return PublishRequest(d, d["operation_id"], d["ledger_namespace"], d["item_id"],
                              d["expected_revision"], d["candidate_source_base64"], d["candidate_sha256"],
                              f["ledger_namespace"], f["item_id"], f["owner_id"], v.parse_epoch(f["epoch"]))
    if op == "publication-read":
        return PublicationReadRequest(d, d["operation_id"], d["ledger_namespace"], d["item_id"])
    raise ValueError(op)


def check_candidate(request: PublishRequest) -> bytes | Reply:
    """Publish step 2 (canonical base64, size, digest). Returns the candidate
    bytes or the error Reply. Oversize and non-canonical base64 share the
    message ``The candidate source is not canonical base64.`` with details
    ``{"field": "candidate_source_base64"}`` (ledger-item.md §1.6, as the
    shipped CLI answers)."""
    data = v.decode_canonical_base64(request.candidate_source_base64)
    if data is None or len(data) > v.CANDIDATE_MAX_BYTES:
        return publication_error(Code.INVALID_REQUEST, {"field": "candidate_source_base64"},
                                 operation_id=request.operation_id, message=MSG_NOT_CANONICAL_BASE64)
    if sha256_ref(data) != request.candidate_sha256:
        return publication_error(Code.CANDIDATE_DIGEST_MISMATCH, {"operation_id": request.operation_id},
                                 operation_id=request.operation_id)
    return data
