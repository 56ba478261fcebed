"""Every error code of the contract with its exit status, exact message and
state (contract §6 and §8 tables; vectors.md §8-§9).

Messages are part of version 1: backends never write their own prose. The one
code with two messages is ``claim-conflict`` (acquire vs renew/release); use
``message_for(code, command)``.
"""

from __future__ import annotations


class Code:
    INVALID_REQUEST = "invalid-request"
    CANDIDATE_DIGEST_MISMATCH = "candidate-digest-mismatch"
    LEDGER_NAMESPACE_UNBOUND = "ledger-namespace-unbound"
    CAPABILITY_UNAVAILABLE = "capability-unavailable"
    OPERATION_NOT_FOUND = "operation-not-found"
    LEDGER_INVALID = "ledger-invalid"
    CLAIM_CONFLICT = "claim-conflict"
    CLAIM_HELD = "claim-held"
    CLAIM_EXPIRED = "claim-expired"
    CLAIM_FENCE_REJECTED = "claim-fence-rejected"
    LEDGER_REVISION_CONFLICT = "ledger-revision-conflict"
    IDEMPOTENCY_CONFLICT = "idempotency-conflict"
    ACTIVE_CLAIM_WRITE_REFUSED = "active-claim-write-refused"
    CLAIMED_ITEM_WRITE_REFUSED = "claimed-item-write-refused"
    CLOCK_FLOOR_PERSISTENCE_FAILED = "clock-floor-persistence-failed"
    PUBLICATION_OUTCOME_UNKNOWN = "publication-outcome-unknown"
    EPOCH_EXHAUSTED = "epoch-exhausted"
    CLAIM_STORE_UNAVAILABLE = "claim-store-unavailable"


EXIT: dict[str, int] = {
    Code.INVALID_REQUEST: 2,
    Code.CANDIDATE_DIGEST_MISMATCH: 2,
    Code.LEDGER_NAMESPACE_UNBOUND: 2,
    Code.CAPABILITY_UNAVAILABLE: 2,
    Code.OPERATION_NOT_FOUND: 2,
    Code.LEDGER_INVALID: 3,
    Code.CLAIM_CONFLICT: 4,
    Code.CLAIM_HELD: 4,
    Code.CLAIM_EXPIRED: 4,
    Code.CLAIM_FENCE_REJECTED: 4,
    Code.LEDGER_REVISION_CONFLICT: 4,
    Code.IDEMPOTENCY_CONFLICT: 4,
    Code.ACTIVE_CLAIM_WRITE_REFUSED: 4,
    Code.CLAIMED_ITEM_WRITE_REFUSED: 4,
    Code.CLOCK_FLOOR_PERSISTENCE_FAILED: 6,
    Code.PUBLICATION_OUTCOME_UNKNOWN: 6,
    Code.EPOCH_EXHAUSTED: 6,
    Code.CLAIM_STORE_UNAVAILABLE: 6,
}

#: every code leaves state "unchanged" except the one whose outcome is unknown
STATE: dict[str, str] = {code: "unchanged" for code in EXIT}
STATE[Code.PUBLICATION_OUTCOME_UNKNOWN] = "unknown"

MSG_NOT_STRICT_JSON = "The request is not unique-key UTF-8 JSON."
MSG_NOT_CANONICAL_BASE64 = "The candidate source is not canonical base64."
MSG_RETRY_INCOMPLETE = "The publish-claimed retry must include its complete request."
MSG_CLAIM_CONFLICT_ACQUIRE = "The observed claim state no longer matches this request."
MSG_CLAIM_CONFLICT_TUPLE = "The active claim tuple no longer matches this request."

MESSAGE: dict[str, str] = {
    Code.CANDIDATE_DIGEST_MISMATCH: "The candidate digest does not match the candidate source.",
    Code.LEDGER_NAMESPACE_UNBOUND: "The ledger namespace is not provisioned for this endpoint.",
    Code.CAPABILITY_UNAVAILABLE: "Claim-protected publication is unavailable on an advisory backend.",
    Code.OPERATION_NOT_FOUND: "The publication operation outcome was not found.",
    Code.LEDGER_INVALID: "The candidate ledger is invalid.",
    Code.CLAIM_HELD: "The item has an unexpired active claim.",
    Code.CLAIM_EXPIRED: "The matching claim has expired.",
    Code.CLAIM_FENCE_REJECTED: "The supplied claim fence is not the active owner generation.",
    Code.LEDGER_REVISION_CONFLICT: "The durable ledger revision no longer matches this publication.",
    Code.IDEMPOTENCY_CONFLICT: "The operation identity is already bound to a different request.",
    Code.ACTIVE_CLAIM_WRITE_REFUSED: "Legacy transition cannot write an item with an active claim.",
    Code.CLAIMED_ITEM_WRITE_REFUSED: "Legacy create cannot write an item identity with claim history.",
    Code.CLOCK_FLOOR_PERSISTENCE_FAILED: "The authoritative clock floor could not be persisted.",
    Code.PUBLICATION_OUTCOME_UNKNOWN: "The publication outcome could not be determined.",
    Code.EPOCH_EXHAUSTED: "The epoch high-water mark is exhausted.",
    Code.CLAIM_STORE_UNAVAILABLE: "The durable claim store is unavailable.",
}

#: the schema message per (envelope namespace, command). Only the
#: publish-claimed one is quoted by the contract (§6); the others follow its
#: pattern (vectors.md §8.8: no vector depends on their wording).
_SCHEMA_NAME = {
    ("work-claim", "capabilities"): "work-claim capabilities",
    ("work-claim", "read"): "work-claim read",
    ("work-claim", "acquire"): "work-claim acquire",
    ("work-claim", "renew"): "work-claim renew",
    ("work-claim", "release"): "work-claim release",
    ("ledger-publication", "publish-claimed"): "publish-claimed",
    ("ledger-publication", "read"): "ledger-publication read",
    ("ledger-mutation", "transition-v1"): "legacy transition",
    ("ledger-mutation", "create-v1"): "legacy create",
}


def schema_message(namespace: str, command: str) -> str:
    """``The request does not match <name> version 1.``"""
    return f"The request does not match {_SCHEMA_NAME.get((namespace, command), command)} version 1."


def message_for(code: str, command: str | None = None) -> str:
    """The exact message of ``code``; ``command`` picks the claim-conflict variant."""
    if code == Code.CLAIM_CONFLICT:
        return MSG_CLAIM_CONFLICT_ACQUIRE if command == "acquire" else MSG_CLAIM_CONFLICT_TUPLE
    if code == Code.INVALID_REQUEST:
        raise ValueError("invalid-request has several messages; pick one explicitly")
    return MESSAGE[code]


def exit_for(code: str) -> int:
    return EXIT[code]


def state_for(code: str) -> str:
    return STATE[code]
