"""Synthetic ledger items for the claims workload (ledger-item.md §3, §6).

IDs are minted the reference way (10 Crockford characters of the ``created``
date's midnight, 16 of entropy) with the entropy from the seeded stream, so a
run's items are a pure function of its seed. Item bytes come from
``backends.contract.ledger_item.render_item(fields, body)``, the one canonical
renderer. Until that module exists, ``_fallback_render`` writes the same
canonical layout (§6.4: one line per scalar, free text double-quoted through
``json.dumps``, flow ``[]`` lists, two-space block mappings); it goes away as
soon as ``render_item`` is importable.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import json

from workloads.random import Stream

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CREATED = "2030-01-11"
RECORDED_AT = "2030-01-11T09:15:30.250Z"


def _b32(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(CROCKFORD[value % 32])
        value //= 32
    return "".join(reversed(out))


def mint_item_id(stream: Stream, created: str = CREATED) -> tuple[str, Stream]:
    y, m, d = (int(x) for x in created.split("-"))
    ms = calendar.timegm((y, m, d, 0, 0, 0)) * 1000
    bits, stream = stream.bits64()
    more, stream = stream.bits64()
    entropy = ((bits << 16) | (more & 0xFFFF)) & ((1 << 80) - 1)
    return "wb_" + _b32(ms, 10) + _b32(entropy, 16), stream


def mint_namespace(stream: Stream) -> tuple[str, Stream]:
    digits, stream = stream.hex(32)
    return "wbns_" + digits, stream


def item_fields(item_id: str, title: str, updated: str = CREATED) -> dict:
    """Front matter of a valid in-progress item (§6.1)."""
    return {
        "schema_version": 1,
        "id": item_id,
        "title": title,
        "kind": "task",
        "status": "in-progress",
        "created": CREATED,
        "updated": updated,
        "provenance": {"source": "generator/claims", "recorded_at": RECORDED_AT},
        "depends_on": [],
    }


def _quote(text: str) -> str:
    s = json.dumps(text, ensure_ascii=False)
    return s.replace("\u0085", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _fallback_render(fields: dict, body: str) -> bytes:
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k}: {_quote(v) if isinstance(v, str) else v}" for k, v in value.items()]
        elif isinstance(value, list):
            lines.append(f"{key}: []" if not value else f"{key}: [{', '.join(value)}]")
        elif key in ("title",):
            lines.append(f"{key}: {_quote(value)}")
        else:
            lines.append(f"{key}: {value}")
    lines.append("---")
    return ("\n".join(lines) + "\n\n" + body.rstrip("\n") + "\n").encode("utf-8")


def render(fields: dict, body: str) -> bytes:
    """Canonical item bytes (the contract's renderer when available)."""
    try:
        from backends.contract.ledger_item import render_item  # type: ignore[attr-defined]
    except ImportError:
        return _fallback_render(fields, body)
    return render_item(fields, body)


def revision_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def stored_revision(read_result: dict) -> str | None:
    """The ``committed_revision`` of a publication read's stored outcome (``None``: it committed nothing)."""
    stdout = (read_result.get("outcome") or {}).get("stdout") or {}
    return (stdout.get("result") or {}).get("committed_revision")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def candidate(item_id: str, owner: str, note: str) -> bytes:
    """A valid successor item for ``item_id``, unique per ``note``."""
    return render(item_fields(item_id, f"Synthetic work item by {owner} op {note}"), f"Published by {owner} as {note}.")


def publish_request(operation_id: str, ns: str, item_id: str, expected_revision: str, fence: dict, owner: str,
                    data: bytes | None = None) -> dict:
    """A complete ``publish-claimed`` request (contract §6) with a fresh candidate."""
    data = candidate(item_id, owner, operation_id) if data is None else data
    return {
        "operation_id": operation_id, "ledger_namespace": ns, "item_id": item_id,
        "expected_revision": expected_revision,
        "candidate_source_base64": b64(data), "candidate_sha256": revision_of(data),
        "claim_fence": dict(fence),
    }
