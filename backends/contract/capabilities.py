"""Capability discovery, derived from a backend's configuration (contract §3,
vectors.md §8.1). A backend never writes its capability reply by hand: what it
*is* (``BackendConfig``) decides what it may claim.

Profiles:

* ``fenced`` (default): fenced iff the scope is
  ``shared-transactional-coordinator``, durability is ``durable-coordinator``,
  the allowlist is non-empty and the write-path inventory is exactly the four
  required keys with their required values. Otherwise advisory.
* ``merge-coordinated``: the Git-journal profile of contract §3 (its own
  scope, ``git-history-reconciliation``, never safe for exclusive dispatch).
  Needs a non-empty allowlist, else advisory.
* ``advisory``: an unprovisioned ledger; always advisory.
"""

from __future__ import annotations

from backends.contract.records import BackendConfig, Reply
from backends.contract.envelopes import capabilities_envelope

FENCED_SCOPE = "shared-transactional-coordinator"
MERGE_SCOPE = "shared-git-common-dir-serialized-journal"
DURABLE = "durable-coordinator"

REQUIRED_WRITE_PATHS = {
    "alternate": "none",
    "claimed_publication_v1": "atomic-fence",
    "legacy_create_v1": "reject-claimed-id",
    "legacy_transition_v1": "reject-active-claim",
}
MERGE_WRITE_PATHS = {**REQUIRED_WRITE_PATHS, "claimed_publication_v1": "git-journal-fence"}

#: the work-claim api_version these backends implement (version 2 only renames the oversized-candidate error)
API_VERSION = 1


def is_fenced(config: BackendConfig) -> bool:
    """All conditions of vectors.md §8.1 (and contract §3) hold."""
    return (
        config.profile == "fenced"
        and config.coordination_scope == FENCED_SCOPE
        and config.durability == DURABLE
        and len(config.namespaces) > 0
        and dict(config.write_paths) == REQUIRED_WRITE_PATHS
    )


def is_merge_coordinated(config: BackendConfig) -> bool:
    return config.profile == "merge-coordinated" and len(config.namespaces) > 0


def publication_capable(config: BackendConfig) -> bool:
    """May ``publish-claimed`` proceed past the capability check?"""
    return is_fenced(config) or is_merge_coordinated(config)


def work_claim_operation(config: BackendConfig) -> dict:
    """``result.operations.work_claim``; ``write_paths`` echoes the inventory
    exactly as configured, omissions included."""
    if is_fenced(config):
        mode, publication, enforced, safe = "fenced", True, "ledger-publication-commit-boundary", True
    elif is_merge_coordinated(config):
        mode, publication, enforced, safe = "merge-coordinated", True, "git-history-reconciliation", False
    else:
        mode, publication, enforced, safe = "advisory", False, "none", False
    return {
        "supported": True,
        "api_version": API_VERSION,
        "mode": mode,
        "claim_protected_publication": publication,
        "fencing_enforced_at": enforced,
        "safe_exclusive_dispatch": safe,
        "write_paths": dict(config.write_paths),
    }


def capabilities_reply(config: BackendConfig) -> Reply:
    scope = MERGE_SCOPE if is_merge_coordinated(config) else config.coordination_scope
    result = {
        "backend": {
            "name": config.name,
            "coordination_scope": scope,
            "ledger_binding": {"mode": "explicit-allowlist", "namespaces": list(config.namespaces)},
        },
        "operations": {"work_claim": work_claim_operation(config)},
    }
    return capabilities_envelope(result)
