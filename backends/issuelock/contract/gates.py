"""Every gate of the protocol as a pure function: the stores decide with these,
and the checkers re-ask them about every lock a writer reported as created.

A gate returns ``None`` (pass) or a ``Refusal``. Inputs are plain values: the
lock as stored (``None`` for no lock), the server-resolved identity
(``{username, profile}`` or ``None``), the caller's token, the store's own
decision time, and for binding checks an ``observed`` binding::

    {"branch_head": sha | None, "base_head": sha, "branch_issue": "remote/org/repo/n" | None,
     "worktree": {"exists": bool, "registered": bool, "branch": name | None}}

Precedence. The spec lists what recovery verifies but not in which order its
refusals win; the suite's order (``recovery_decision``) is: nothing to recover,
wrong repository/issue, identity, a canonical lock (own -> already canonical;
live foreign -> healthy foreign lock; other foreign -> foreign claimant), a
foreign claimant, branch/worktree binding, worktree validity, head. Session
gates check identity, lock presence, canonical shape, claimant, token, then
expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.issuelock.contract import codes as C
from backends.issuelock.contract import fields as F
from backends.issuelock.contract import reader as R


@dataclass(frozen=True)
class Refusal:
    code: str
    details: dict = field(default_factory=dict)


def _base_equivalent(observed: dict | None) -> bool:
    observed = observed or {}
    head = observed.get("branch_head")
    return head is not None and head == observed.get("base_head")


def _worktree_ok(observed: dict | None, branch_name: str) -> bool:
    wt = (observed or {}).get("worktree") or {}
    return bool(wt.get("exists")) and bool(wt.get("registered")) and wt.get("branch") == branch_name


# --------------------------------------------------------------------------- session gates


def _session_gate(lock: dict | None, identity: dict | None, session: str | None) -> Refusal | None:
    if identity is None:
        return Refusal(C.IDENTITY_UNRESOLVED)
    if lock is None:
        return Refusal(C.NO_DURABLE_LOCK)
    missing = R.missing_fields(lock)
    if missing:
        return Refusal(C.INCOMPLETE, {"missing_fields": missing, "expiration_state": R.expiration_state(lock)})
    if not R.same_identity(R.lock_claimant(lock), identity):
        return Refusal(C.FOREIGN_CLAIMANT)
    if session is None or session != R.task_session_id(lock):
        return Refusal(C.STALE_SESSION)
    return None


def assess_heartbeat(lock, identity, session, now_ms: int) -> Refusal | None:
    """``gitea_heartbeat_issue_lock``; also every fenced write (``commit``)."""
    refusal = _session_gate(lock, identity, session)
    if refusal is None and now_ms >= R.expires_at_ms(lock):
        return Refusal(C.LEASE_EXPIRED, {"expires_at": lock["work_lease"]["expires_at"]})
    return refusal


def assess_renew(lock, identity, session, now_ms: int) -> Refusal | None:
    """#760 exact-owner renewal: only an expired lease is assessed. A missing
    expiry is not "expired" here either: the lock is not canonical, and the
    refusal names the recovery path instead of stranding it."""
    refusal = _session_gate(lock, identity, session)
    if refusal is None and now_ms < R.expires_at_ms(lock):
        return Refusal(C.LEASE_NOT_EXPIRED, {"expires_at": lock["work_lease"]["expires_at"]})
    return refusal


def assess_lock_file_for_create_pr(lock: dict | None) -> Refusal | None:
    """The #447 guard (``issue_lock_provenance.assess_lock_file_for_create_pr``):
    a sanctioned ``lock_provenance`` and a ``work_lease``, unchanged by #953."""
    lock = lock if isinstance(lock, dict) else {}
    provenance = lock.get("lock_provenance")
    source = provenance.get("source") if isinstance(provenance, dict) else None
    if source not in F.SANCTIONED_SOURCES or not isinstance(lock.get("work_lease"), dict):
        return Refusal(C.CREATE_PR_GUARD, {"lock_provenance_source": source,
                                           "work_lease": isinstance(lock.get("work_lease"), dict)})
    return None


def assess_create_pr(lock, identity, session, now_ms: int, observed: dict | None) -> Refusal | None:
    if identity is None:
        return Refusal(C.IDENTITY_UNRESOLVED)
    if lock is None:
        return Refusal(C.NO_DURABLE_LOCK)
    refusal = assess_lock_file_for_create_pr(lock) or assess_heartbeat(lock, identity, session, now_ms)
    if refusal is None and _base_equivalent(observed):
        return Refusal(C.NOTHING_TO_PROPOSE)
    return refusal


# --------------------------------------------------------------------------- writers


def assess_bootstrap(lock, identity, now_ms: int, observed: dict | None) -> Refusal | None:
    """May bootstrap write a fresh lock? ``observed`` is the binding of the
    EXISTING lock (its branch), used to name the recovery step."""
    if identity is None:
        return Refusal(C.IDENTITY_UNRESOLVED)
    if lock is None:
        return None
    own = R.same_identity(R.lock_claimant(lock), identity)
    if R.is_live(lock, now_ms):
        return Refusal(C.ALREADY_CANONICAL if own else C.HEALTHY_FOREIGN_LOCK)
    if own and not R.is_canonical(lock):
        return Refusal(C.INCOMPLETE, {"missing_fields": R.missing_fields(lock),
                                      "expiration_state": R.expiration_state(lock)})
    return None  # absent, expired, or a foreign lock without a live recorded expiry


def assess_relock(lock, identity, key: F.IssueKey, branch_name: str, worktree_path: str, now_ms: int,
                  observed: dict | None) -> Refusal | None:
    """``gitea_lock_issue`` on an existing binding: only while the branch is
    base-equivalent; never over a live foreign lock."""
    if identity is None:
        return Refusal(C.IDENTITY_UNRESOLVED)
    if lock is not None and R.is_live(lock, now_ms) and not R.same_identity(R.lock_claimant(lock), identity):
        return Refusal(C.HEALTHY_FOREIGN_LOCK)
    observed = observed or {}
    if observed.get("branch_head") is None or observed.get("branch_issue") != key.path:
        return Refusal(C.BINDING_MISMATCH, {"branch_name": branch_name})
    if not _worktree_ok(observed, branch_name):
        return Refusal(C.WORKTREE_INVALID, {"worktree_path": worktree_path})
    if not _base_equivalent(observed):
        return Refusal(C.NOT_BASE_EQUIVALENT, {"branch_head": observed.get("branch_head"),
                                               "base_head": observed.get("base_head")})
    return None


def recovery_decision(lock, identity, key: F.IssueKey, branch_name: str, worktree_path: str, expected_head: str,
                      now_ms: int, observed: dict | None) -> Refusal | None:
    """``gitea_recover_incomplete_bootstrap_lock``: ``None`` = recover; else one
    of ``REFUSAL_CODES`` (module docstring: precedence)."""
    if lock is None:
        return Refusal(C.NO_DURABLE_LOCK)
    recorded = R.binding(lock)
    if (recorded["remote"], recorded["org"], recorded["repo"], recorded["issue_number"]) != tuple(key):
        return Refusal(C.BINDING_MISMATCH, {"field": "repository"})
    if identity is None:
        return Refusal(C.IDENTITY_UNRESOLVED)
    own = R.same_identity(R.lock_claimant(lock), identity)
    if R.is_canonical(lock):
        if own:
            return Refusal(C.ALREADY_CANONICAL)
        return Refusal(C.HEALTHY_FOREIGN_LOCK if R.is_live(lock, now_ms) else C.FOREIGN_CLAIMANT)
    if not own:
        return Refusal(C.FOREIGN_CLAIMANT)
    if recorded["branch_name"] != branch_name or recorded["worktree_path"] != worktree_path:
        return Refusal(C.BINDING_MISMATCH, {"field": "branch" if recorded["branch_name"] != branch_name
                                            else "worktree"})
    if not _worktree_ok(observed, branch_name):
        return Refusal(C.WORKTREE_INVALID, {"worktree": (observed or {}).get("worktree")})
    if (observed or {}).get("branch_head") != expected_head:
        return Refusal(C.HEAD_MISMATCH, {"observed_head": (observed or {}).get("branch_head")})
    return None


# --------------------------------------------------------------------------- advice


def _recovery_step(observed: dict | None) -> str:
    return C.NEXT_LOCK if _base_equivalent(observed) else C.NEXT_RECOVER


def bootstrap_next_action(success: bool, reason_code: str | None, observed: dict | None) -> str:
    """What bootstrap's ``exact_next_action`` must name for the state it
    returned (the spec: it always matches that state)."""
    if success:
        return C.NEXT_HEARTBEAT
    if reason_code == C.INCOMPLETE:
        return _recovery_step(observed)
    if reason_code == C.ALREADY_CANONICAL:  # a caller without the live token re-locks while it still can
        return C.NEXT_LOCK if _base_equivalent(observed) else C.NEXT_NONE
    if reason_code == C.IDENTITY_UNRESOLVED:
        return C.NEXT_WHOAMI
    return C.NEXT_NONE


def next_action_request(action: str, key: F.IssueKey, lock: dict | None, observed: dict | None,
                        session: str | None = None) -> dict | None:
    """The executable request of a next action (identity is the caller's own)."""
    base = key.as_request()
    if action == C.NEXT_HEARTBEAT and session is not None:
        return dict(base, task_session_id=session)
    if action == C.NEXT_LOCK and lock is not None:
        return dict(base, branch_name=lock.get("branch_name"), worktree_path=lock.get("worktree_path"))
    if action == C.NEXT_RECOVER and lock is not None:
        return dict(base, branch_name=lock.get("branch_name"), worktree_path=lock.get("worktree_path"),
                    expected_head=(observed or {}).get("branch_head"), dry_run=False)
    return None


def recommended_action(lock, identity, now_ms: int, observed: dict | None) -> str:
    """``inspect``'s recommendation for the caller. A lock without a recorded,
    parseable expiry is never "not yet expired": its owner recovers it (or
    re-locks while base-equivalent) and anyone else may take it over."""
    if identity is None:
        return C.NEXT_WHOAMI
    if lock is None:
        return C.NEXT_BOOTSTRAP
    own = R.same_identity(R.lock_claimant(lock), identity)
    if R.is_canonical(lock):
        if R.is_live(lock, now_ms):
            return C.NEXT_HEARTBEAT if own else C.NEXT_NONE
        return C.NEXT_RENEW if own else C.NEXT_BOOTSTRAP
    return _recovery_step(observed) if own else C.NEXT_BOOTSTRAP
