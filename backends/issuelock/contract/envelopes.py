"""Every reply of the issue-lock protocol is built here (one JSON object per reply).

Shape::

    {"ok": bool, "op": <operation>, "success": bool, "state": "changed" | "unchanged" | "unknown",
     "decided_at": <instant> (every decision the store made), ...members}

A refusal adds ``message`` and its code: ``refusal_code`` for ``recover`` (the
spec's name), ``reason_code`` for every other operation (bootstrap's spec
name). ``ok`` is true exactly when the exit code is 0, so the work-claim
classifier (``checkers.history.classify``) reads these replies as it reads
work-claim ones: exit 0 -> ok; exit 2/3 with ``state: "unchanged"`` -> fail;
anything else -> info.
"""

from __future__ import annotations

from backends.contract.records import Reply
from backends.contract.values import format_instant
from backends.issuelock.contract import codes as C


def code_member(op: str) -> str:
    return "refusal_code" if op == "recover" else "reason_code"


def reply_code(envelope: dict | None) -> str | None:
    """The refusal/reason code of a reply, whatever the operation."""
    if not isinstance(envelope, dict):
        return None
    return envelope.get("refusal_code") or envelope.get("reason_code")


def _at(decided_at_ms: int | None) -> dict:
    return {} if decided_at_ms is None else {"decided_at": format_instant(decided_at_ms)}


def success(op: str, decided_at_ms: int | None, changed: bool, **members) -> Reply:
    env = {"ok": True, "op": op, "success": True, "state": "changed" if changed else "unchanged",
           **_at(decided_at_ms), **members}
    return Reply(C.EXIT_OK, env)


def refusal(op: str, code: str, decided_at_ms: int | None, details: dict | None = None, **members) -> Reply:
    """A decided refusal: nothing was written."""
    env = {"ok": False, "op": op, "success": False, "state": "unchanged", **_at(decided_at_ms),
           code_member(op): code, "message": C.MESSAGE[code]}
    if details:
        env["details"] = details
    env.update(members)
    return Reply(C.EXIT_REFUSED, env)


def failed_after_write(op: str, code: str, decided_at_ms: int, details: dict | None = None, **members) -> Reply:
    """A write happened and then failed closed (bootstrap's read-back found a
    partial lock): exit 3 with ``state: "changed"``."""
    reply = refusal(op, code, decided_at_ms, details, **members)
    reply.envelope["state"] = "changed"
    return reply


def invalid(op: str, member: str, problem: str) -> Reply:
    env = {"ok": False, "op": op, "success": False, "state": "unchanged", "reason_code": C.INVALID_REQUEST,
           "message": C.MESSAGE[C.INVALID_REQUEST], "details": {"member": member, "problem": problem}}
    return Reply(C.EXIT_INVALID, env)


def store_failure(op: str, code: str, reason: str) -> Reply:
    """Exit 6: ``store_unavailable`` (nothing decided) or ``outcome_unknown``."""
    state = "unknown" if code == C.OUTCOME_UNKNOWN else "unchanged"
    env = {"ok": False, "op": op, "success": False, "state": state, code_member(op): code,
           "message": C.MESSAGE[code], "details": {"reason": reason}}
    return Reply(C.EXIT_STORE, env)
