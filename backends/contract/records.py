"""The contract's own value types: what a reply is, what a claim record holds,
what a backend is configured to be.

``Reply`` is the contract's exit code and the one JSON object of stdout;
``ClaimRecord`` (with its ``Active`` lease) is the state §4 describes, with
epochs as ``int`` and instants as ``int`` milliseconds (``values`` converts to
the wire forms); ``BackendConfig`` is what ``capabilities`` derives the
capabilities envelope from. The storage protocols that hold these records
(``backends.api``: Store, Txn) import them from here, never the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reply:
    """One public reply: process exit code plus the one JSON object of stdout."""

    exit: int
    envelope: dict

    def to_json(self) -> dict:
        return {"exit": self.exit, "envelope": self.envelope}


@dataclass(frozen=True)
class Active:
    owner_id: str
    epoch: int
    issued_at: int   # ms since epoch
    expires_at: int  # ms since epoch


@dataclass(frozen=True)
class ClaimRecord:
    ledger_namespace: str
    item_id: str
    last_epoch: int
    active: Active | None


@dataclass
class BackendConfig:
    """What a backend is configured to be. Capabilities are derived from it by
    ``backends.contract.capabilities`` and never written by hand."""

    name: str
    namespaces: list[str]
    coordination_scope: str = "shared-transactional-coordinator"
    durability: str = "durable-coordinator"
    write_paths: dict[str, str] = field(
        default_factory=lambda: {
            "alternate": "none",
            "claimed_publication_v1": "atomic-fence",
            "legacy_create_v1": "reject-claimed-id",
            "legacy_transition_v1": "reject-active-claim",
        }
    )
    profile: str = "fenced"  # "fenced" | "merge-coordinated" | "advisory"
