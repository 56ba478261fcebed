"""The one builder of issue locks (``author_lock_contract.build_canonical_issue_lock``).

Both writers (bootstrap and lock) and recovery build the lock here; every lease
write (heartbeat, renew) derives the next record here. Nothing else in the
suite formats a lock. ``build_legacy_bootstrap_lock`` is the pre-#953 thin
shape, kept ONLY so the suite can seed such locks (they exist in the wild and
must be recoverable) and plant the historical bug; no sanctioned writer uses it.

Server-side minting: ``task_session_id`` (``ts_`` + 32 hex), ``lease_id`` and
``lock_provenance`` are minted by the engine (``mint_session_id``,
``mint_lease_id``, ``provenance``); no request member can supply them.
"""

from __future__ import annotations

import copy
import secrets

from backends.contract.values import format_instant
from backends.issuelock.contract import fields as F
from backends.issuelock.contract import reader as R


def mint_session_id() -> str:
    return "ts_" + secrets.token_hex(16)


def mint_lease_id() -> str:
    return "lease_" + secrets.token_hex(12)


def provenance(writer: str, now_ms: int) -> dict:
    """Sanctioned provenance: always ``SOURCE_LOCK_ISSUE`` (the #447 guard's set
    is not widened), the writing code path, and when it was minted."""
    if writer not in F.WRITERS:
        raise ValueError(f"unknown writer {writer!r}")
    return {"source": F.SOURCE_LOCK_ISSUE, "writer": writer, "minted_at": format_instant(now_ms)}


def build_canonical_issue_lock(key: F.IssueKey, branch_name: str, worktree_path: str, claimant: dict,
                               ttl_ms: int, now_ms: int, generation: int, writer: str,
                               task_session_id: str | None = None, lease_id: str | None = None) -> dict:
    """A canonical lock: every field of ``REQUIRED_LOCK_FIELDS`` and
    ``REQUIRED_WORK_LEASE_FIELDS``, claimant in ``work_lease`` only."""
    if generation < 1:
        raise ValueError("lock_generation starts at 1")
    at = format_instant(now_ms)
    return {
        "remote": key.remote, "org": key.org, "repo": key.repo, "issue_number": key.issue_number,
        "branch_name": branch_name, "worktree_path": worktree_path,
        "lease_id": lease_id or mint_lease_id(),
        "work_lease": {
            "claimant": {"username": claimant["username"], "profile": claimant["profile"]},
            "lease_policy": {"kind": F.LEASE_KIND, "ttl_ms": int(ttl_ms)},
            "acquired_at": at,
            "expires_at": format_instant(now_ms + int(ttl_ms)),
            "last_heartbeat_at": at,
            "heartbeat_count": 0,
            "task_session_id": task_session_id or mint_session_id(),
            "lifecycle_version": F.LIFECYCLE_VERSION,
        },
        "lock_provenance": provenance(writer, now_ms),
        "lock_generation": int(generation),
    }


def next_lease_write(lock: dict, now_ms: int) -> dict:
    """The record after a heartbeat or a renewal of ``lock`` at ``now_ms``:
    liveness evidence, a sliding expiry from ``lease_policy``, the next
    generation (every write advances it). ``lock`` must be canonical."""
    if not R.is_canonical(lock):
        raise ValueError(f"not a canonical lock: missing {R.missing_fields(lock)}")
    out = copy.deepcopy(lock)
    lease = out["work_lease"]
    lease["last_heartbeat_at"] = format_instant(now_ms)
    lease["heartbeat_count"] = lease["heartbeat_count"] + 1
    lease["expires_at"] = format_instant(now_ms + lease["lease_policy"]["ttl_ms"])
    out["lock_generation"] = R.lock_generation(lock) + 1
    return out


def recovery_block(prior: dict, recovered_by: dict, replacement_session: str, preserved_head: str,
                   now_ms: int) -> dict:
    """Both sides of a recovery: what the lock was, and what replaced it."""
    return {
        "recovered_at": format_instant(now_ms),
        "recovered_by": {"username": recovered_by["username"], "profile": recovered_by["profile"]},
        "prior_contract": R.lock_contract(prior),
        "prior_missing_fields": R.missing_fields(prior),
        "prior_generation": prior.get("lock_generation") if F.is_int(prior.get("lock_generation")) else None,
        "prior_owning_session": R.task_session_id(prior),
        "prior_claimant_placement": R.claimant_placement(prior),
        "replacement_task_session_id": replacement_session,
        "preserved_head": preserved_head,
    }


def build_recovered_lock(prior: dict, identity: dict, ttl_ms: int, now_ms: int, preserved_head: str,
                         task_session_id: str | None = None, lease_id: str | None = None) -> dict:
    """The canonical replacement of an incomplete lock, on the prior lock's own
    binding, carrying the ``bootstrap_lock_recovery`` block."""
    key = F.IssueKey.of(prior)
    session = task_session_id or mint_session_id()
    lock = build_canonical_issue_lock(key, prior["branch_name"], prior["worktree_path"], identity, ttl_ms, now_ms,
                                      R.lock_generation(prior) + 1, "recover", session, lease_id)
    lock[F.RECOVERY_BLOCK] = recovery_block(prior, identity, session, preserved_head, now_ms)
    return lock


def build_legacy_bootstrap_lock(key: F.IssueKey, branch_name: str, worktree_path: str, claimant: dict,
                                generation: int | None = 1) -> dict:
    """The pre-#953 bootstrap record: claimant at the top level, ``lease_id:
    null``, no ``work_lease``, no ``lock_provenance``, no expiry. Seeding and the
    red team only."""
    lock = {"remote": key.remote, "org": key.org, "repo": key.repo, "issue_number": key.issue_number,
            "branch_name": branch_name, "worktree_path": worktree_path,
            "claimant": dict(claimant), "lease_id": None}
    if generation is not None:
        lock["lock_generation"] = generation
    return lock
