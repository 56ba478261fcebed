"""SHA-256 references, ledger revisions and publication operation digests
(contract §6, vectors.md §10)."""

from __future__ import annotations

import hashlib

from backends.contract.jsonstrict import canonical_json


def sha256_ref(data: bytes) -> str:
    """``sha256:`` + 64 lowercase hex digits of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def revision(item_bytes: bytes) -> str:
    """The revision of a ledger item: the digest of its exact bytes (no
    normalisation of BOM, CRs or body)."""
    return sha256_ref(item_bytes)


def operation_digest(request: dict) -> str:
    """Digest of the complete publish request in canonical JSON."""
    return sha256_ref(canonical_json(request))
