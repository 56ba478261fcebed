"""The one reader of an issue lock: every store, gate, workload and checker reads through it.

Two writers once disagreed about what a lock *is*; the cure is that there is
one reader (``issue_lock_store.lock_claimant`` and friends) and one builder
(``builder``), and both are here.

* ``lock_claimant`` reads ``work_lease.claimant`` (canonical) and falls back to
  a top-level ``claimant`` (the pre-#953 bootstrap placement). When both are
  present the ``work_lease`` copy wins: after an upgrade a stale top-level
  copy must never decide ownership. Tolerating the placement grants nothing:
  callers still compare username AND profile with the server-resolved identity.
* ``expiration_state`` names the real fact (``recorded`` / ``missing`` /
  ``unparseable``). A lock without a recorded expiry is never "not yet
  expired": ``is_live`` is False for it, so it neither blocks a takeover
  forever nor strands its owner (it is eligible for recovery).
* ``missing_fields`` names every required field that is absent, null or not of
  its contract type, as a dotted path; ``[]`` means canonical.
"""

from __future__ import annotations

from backends.contract.jsonstrict import StrictJSONError, loads_strict
from backends.contract.values import parse_instant
from backends.issuelock.contract import fields as F


class LockUnreadable(ValueError):
    """Stored lock bytes that are not one strict JSON object."""


def parse_lock(raw: bytes | None) -> dict | None:
    """Stored bytes -> the lock object (``None`` for no lock)."""
    if raw is None:
        return None
    try:
        doc = loads_strict(raw)
    except StrictJSONError as e:
        raise LockUnreadable(f"lock bytes are not strict JSON: {e}") from None
    if not isinstance(doc, dict):
        raise LockUnreadable("a lock is a JSON object")
    return doc


def _obj(value) -> dict:
    return value if isinstance(value, dict) else {}


def _claimant_ok(c) -> bool:
    return isinstance(c, dict) and isinstance(c.get("username"), str) and c["username"] != ""


def lock_claimant(lock: dict | None) -> dict | None:
    """``{username, profile}`` as the lock records it (``profile`` may be None
    in a legacy lock), from the canonical placement first."""
    if not isinstance(lock, dict):
        return None
    for c in (_obj(lock.get("work_lease")).get("claimant"), lock.get("claimant")):
        if _claimant_ok(c):
            return {"username": c["username"], "profile": c.get("profile")}
    return None


def claimant_placement(lock: dict | None) -> str | None:
    """Where ``lock_claimant`` found the claimant: ``work_lease``, ``top-level`` or None."""
    if not isinstance(lock, dict):
        return None
    if _claimant_ok(_obj(lock.get("work_lease")).get("claimant")):
        return "work_lease"
    return "top-level" if _claimant_ok(lock.get("claimant")) else None


def same_identity(claimant: dict | None, identity: dict | None) -> bool:
    """Username AND profile match (a matching username alone is never enough)."""
    if not claimant or not identity:
        return False
    keys = F.REQUIRED_CLAIMANT_FIELDS
    return all(isinstance(claimant.get(k), str) and claimant.get(k) != "" and claimant.get(k) == identity.get(k)
               for k in keys)


def expiration_state(lock: dict | None) -> str:
    """``recorded``, ``missing`` or ``unparseable`` (of ``work_lease.expires_at``)."""
    if not isinstance(lock, dict):
        return F.EXPIRY_MISSING
    value = _obj(lock.get("work_lease")).get("expires_at")
    if value is None:
        return F.EXPIRY_MISSING
    try:
        parse_instant(value)
    except (TypeError, ValueError):
        return F.EXPIRY_UNPARSEABLE
    return F.EXPIRY_RECORDED


def expires_at_ms(lock: dict | None) -> int | None:
    """The recorded expiry in ms, or None when it is missing or unparseable."""
    if expiration_state(lock) != F.EXPIRY_RECORDED:
        return None
    return parse_instant(lock["work_lease"]["expires_at"])


def _instant_ok(value) -> bool:
    try:
        parse_instant(value)
        return True
    except (TypeError, ValueError):
        return False


_TOP_TYPES = {
    "remote": lambda v: F.full(F.NAME_RE, v),
    "org": lambda v: F.full(F.NAME_RE, v),
    "repo": lambda v: F.full(F.NAME_RE, v),
    "issue_number": lambda v: F.is_int(v) and 1 <= v <= F.ISSUE_MAX,
    "branch_name": lambda v: F.full(F.BRANCH_RE, v),
    "worktree_path": lambda v: F.full(F.WORKTREE_RE, v),
    "work_lease": lambda v: isinstance(v, dict),
    "lock_provenance": lambda v: isinstance(v, dict),
    "lock_generation": lambda v: F.is_int(v) and v >= 1,
}

_LEASE_TYPES = {
    "claimant": lambda v: isinstance(v, dict),
    "lease_policy": lambda v: isinstance(v, dict) and v.get("kind") == F.LEASE_KIND
    and F.is_int(v.get("ttl_ms")) and F.TTL_MIN_MS <= v["ttl_ms"] <= F.TTL_MAX_MS,
    "acquired_at": _instant_ok,
    "expires_at": _instant_ok,
    "last_heartbeat_at": _instant_ok,
    "heartbeat_count": lambda v: F.is_int(v) and v >= 0,
    "task_session_id": lambda v: F.full(F.SESSION_RE, v),
    "lifecycle_version": lambda v: v == F.LIFECYCLE_VERSION,
}


def missing_fields(lock: dict | None) -> list[str]:
    """Every required field that is absent, null or not of its type, as dotted
    paths in the order of the required-field sets; ``[]`` means canonical."""
    if not isinstance(lock, dict):
        return list(F.REQUIRED_LOCK_FIELDS)
    out = []
    for name in F.REQUIRED_LOCK_FIELDS:
        if lock.get(name) is None or not _TOP_TYPES[name](lock[name]):
            out.append(name)
    lease = lock.get("work_lease")
    if isinstance(lease, dict):
        for name in F.REQUIRED_WORK_LEASE_FIELDS:
            if lease.get(name) is None or not _LEASE_TYPES[name](lease[name]):
                out.append(f"work_lease.{name}")
        claimant = lease.get("claimant")
        if isinstance(claimant, dict):
            for name in F.REQUIRED_CLAIMANT_FIELDS:
                if not isinstance(claimant.get(name), str) or claimant[name] == "":
                    out.append(f"work_lease.claimant.{name}")
    provenance = lock.get("lock_provenance")
    if isinstance(provenance, dict):
        for name in F.REQUIRED_PROVENANCE_FIELDS:
            if not isinstance(provenance.get(name), str) or provenance[name] == "":
                out.append(f"lock_provenance.{name}")
    return out


def lock_contract(lock: dict | None) -> str:
    """``absent`` / ``canonical`` / ``legacy-bootstrap`` (no work_lease or no
    lifecycle_version: the pre-#953 dialect) / ``incomplete``."""
    if lock is None:
        return F.CONTRACT_ABSENT
    if not missing_fields(lock):
        return F.CONTRACT_CANONICAL
    lease = lock.get("work_lease")
    if not isinstance(lease, dict) or lease.get("lifecycle_version") is None:
        return F.CONTRACT_LEGACY
    return F.CONTRACT_INCOMPLETE


def is_canonical(lock: dict | None) -> bool:
    return lock is not None and not missing_fields(lock)


def lock_generation(lock: dict | None) -> int:
    """The recorded generation; 0 for no lock or a legacy lock that never recorded one."""
    g = lock.get("lock_generation") if isinstance(lock, dict) else None
    return g if F.is_int(g) and g >= 0 else 0


def task_session_id(lock: dict | None) -> str | None:
    value = _obj(_obj(lock).get("work_lease")).get("task_session_id")
    return value if isinstance(value, str) else None


def ttl_ms(lock: dict | None) -> int | None:
    value = _obj(_obj(_obj(lock).get("work_lease")).get("lease_policy")).get("ttl_ms")
    return value if F.is_int(value) else None


def is_live(lock: dict | None, now_ms: int) -> bool:
    """Canonical, with a recorded expiry still in the future at ``now_ms``.
    A missing or unparseable expiry is never live."""
    if not is_canonical(lock):
        return False
    exp = expires_at_ms(lock)
    return exp is not None and now_ms < exp


def binding(lock: dict | None) -> dict:
    """The lock's repository, issue and branch binding (values as recorded)."""
    lock = _obj(lock)
    return {k: lock.get(k) for k in ("remote", "org", "repo", "issue_number", "branch_name", "worktree_path")}


def summary(lock: dict | None) -> dict | None:
    """What a reply says about a lock it replaced or refused against."""
    if lock is None:
        return None
    return {"lock_generation": lock_generation(lock), "contract": lock_contract(lock),
            "claimant": lock_claimant(lock), "claimant_placement": claimant_placement(lock),
            "task_session_id": task_session_id(lock), "expiration_state": expiration_state(lock),
            "expires_at": _obj(lock.get("work_lease")).get("expires_at")
            if expiration_state(lock) == F.EXPIRY_RECORDED else None}
