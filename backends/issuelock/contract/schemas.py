"""Strict request parsing for every issue-lock operation.

A request is one strict JSON object (``backends.contract.jsonstrict``: no
duplicate members, no NaN, UTF-8 only) with exactly the members its operation
takes. An unknown member is refused, so no caller can supply provenance,
an authorization flag, a session or a generation: those are minted server-side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.contract.records import Reply
from backends.contract.jsonstrict import StrictJSONError, loads_strict
from backends.issuelock.contract import codes as C
from backends.issuelock.contract import envelopes as E
from backends.issuelock.contract import fields as F

REQUEST_MAX_BYTES = 65_536

_KEY = ("remote", "org", "repo", "issue_number")
_SESSION = ("task_session_id",)
_BINDING = ("branch_name", "worktree_path")

#: op -> (required members beyond agent_token, optional members)
MEMBERS: dict[str, tuple[tuple, tuple]] = {
    "whoami": ((), ()),
    "bootstrap": (_KEY, ()),
    "lock": (_KEY + _BINDING, ()),
    "heartbeat": (_KEY + _SESSION, ()),
    "renew": (_KEY + _SESSION, ()),
    "commit": (_KEY + _SESSION + ("message", "content"), ()),
    "create-pr": (_KEY + _SESSION, ()),
    "inspect": (_KEY, _BINDING),
    "recover": (_KEY + _BINDING + ("expected_head",), ("dry_run",)),
}

_CHECKS = {
    "agent_token": (lambda v: F.full(F.TOKEN_RE, v), "a token: [A-Za-z0-9][A-Za-z0-9._:-]{0,127}"),
    "remote": (lambda v: F.full(F.NAME_RE, v), "a name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
    "org": (lambda v: F.full(F.NAME_RE, v), "a name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
    "repo": (lambda v: F.full(F.NAME_RE, v), "a name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
    "issue_number": (lambda v: F.is_int(v) and 1 <= v <= F.ISSUE_MAX, f"an integer 1..{F.ISSUE_MAX}"),
    "task_session_id": (lambda v: F.full(F.SESSION_RE, v), "a task session id: ts_ + 32 hex (never null)"),
    "branch_name": (lambda v: F.full(F.BRANCH_RE, v), "a branch name"),
    "worktree_path": (lambda v: F.full(F.WORKTREE_RE, v), "a worktree path under branches/"),
    "expected_head": (lambda v: F.full(F.HEAD_RE, v), "a 40-hex commit id"),
    "dry_run": (lambda v: isinstance(v, bool), "a boolean"),
    "message": (lambda v: isinstance(v, str) and 0 < len(v) <= 200 and "\n" not in v, "one line, 1..200 chars"),
    "content": (lambda v: isinstance(v, str) and len(v.encode()) <= F.CONTENT_MAX_BYTES,
                f"a string of at most {F.CONTENT_MAX_BYTES} bytes"),
}


@dataclass(frozen=True)
class Request:
    op: str
    agent_token: str
    key: F.IssueKey | None
    members: dict = field(default_factory=dict)

    def get(self, name: str, default=None):
        return self.members.get(name, default)


def parse_request(op: str, raw: bytes) -> Request | Reply:
    """A ``Request``, or the ``invalid_request`` reply naming the first bad member."""
    if op not in MEMBERS:
        raise ValueError(f"operation {op!r} is not an issue-lock operation")
    if len(raw) > REQUEST_MAX_BYTES:
        return E.invalid(op, "", f"request larger than {REQUEST_MAX_BYTES} bytes")
    try:
        doc = loads_strict(raw)
    except StrictJSONError as e:
        return E.invalid(op, "", f"not strict JSON: {e}")
    if not isinstance(doc, dict):
        return E.invalid(op, "", "a request is a JSON object")
    required, optional = MEMBERS[op]
    allowed = {"agent_token", *required, *optional}
    for name in doc:
        if name not in allowed:
            return E.invalid(op, name, "unknown member (provenance, sessions and authorization are minted "
                                       "server-side)")
    for name in ("agent_token", *required):
        if name not in doc:
            return E.invalid(op, name, "required member is missing")
    for name, value in doc.items():
        ok, problem = _CHECKS[name]
        if not ok(value):
            return E.invalid(op, name, f"must be {problem}")
    key = F.IssueKey.of(doc) if "remote" in doc else None
    members = {k: v for k, v in doc.items() if k not in ("agent_token", *_KEY)}
    if op == "recover":
        members.setdefault("dry_run", False)
    return Request(op, doc["agent_token"], key, members)


assert set(C.OPERATIONS) == set(MEMBERS)
