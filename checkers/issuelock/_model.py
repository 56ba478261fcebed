"""One prepared view of an issue-lock history, shared by every issue-lock checker.

It rides on the invariant checkers' pairing pass (``checkers.invariants._common
.prepare``: invoke order, real-time order of the history file) and adds what
the issue-lock rules need:

* ``LockOp``: an op with its issue key, the server-resolved identity of its
  token (from the seeded identities, the server's own table), its reply's
  code, decision time (``decided_at`` in ms) and lock;
* ``writes``: every op that may have written a lock (a writer that did not
  refuse: ok, info or still open);
* ``known``: per key, generation -> (lock, op) for every lock some reply showed
  in full (writers, inspect, recovery evidence) plus the seeded locks;
* ``final``: the store's final export (``final-state``), by key.

Real-time order: op A precedes op B when A's completion was appended before B's
invocation (``a.cp < b.ip``). Backend time comes only from replies.
"""

from __future__ import annotations

from backends.contract.values import parse_instant
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.envelopes import reply_code
from backends.issuelock.contract.fields import IssueKey
from checkers.invariants._common import Findings
from checkers.records import Op, prepare

WRITERS = ("bootstrap", "lock", "heartbeat", "renew", "recover")
MINTERS = ("bootstrap", "lock", "recover")   # writers that mint a new task_session_id
SESSION_OPS = ("heartbeat", "renew", "commit", "create-pr")


def key_of_request(req: dict) -> str | None:
    try:
        return IssueKey.of(req).path
    except (KeyError, TypeError):
        return None


def ms(value) -> int | None:
    try:
        return parse_instant(value)
    except (TypeError, ValueError):
        return None


class LockOp:
    __slots__ = ("op", "key", "identity", "code", "at", "lock", "f", "type", "env", "req")

    def __init__(self, op: Op, identities: dict):
        self.op = op
        self.f, self.type, self.req = op.f, op.type, op.req
        self.env = op.env or {}
        self.key = key_of_request(op.req)
        self.identity = identities.get(op.req.get("agent_token"))
        self.code = reply_code(self.env)
        self.at = ms(self.env.get("decided_at"))
        lock = self.env.get("lock")
        self.lock = lock if isinstance(lock, dict) and "remote" in lock else None  # a full lock, not a summary

    @property
    def ops(self) -> list[int]:
        return self.op.indices

    @property
    def dry(self) -> bool:
        return self.f == "recover" and self.req.get("dry_run") is True

    @property
    def is_write_attempt(self) -> bool:
        """May have changed the lock: a writer that did not definitely refuse."""
        return self.f in WRITERS and not self.dry and self.type != "fail"

    @property
    def wrote(self) -> dict | None:
        """The lock an ok writer reports it wrote."""
        if self.type == "ok" and self.f in WRITERS and not self.dry and self.env.get("state") == "changed":
            return self.lock
        return None

    def precedes(self, other: "LockOp") -> bool:
        return self.op.cp is not None and self.op.cp < other.op.ip

    def session(self) -> str | None:
        return self.req.get("task_session_id")


class Model:
    def __init__(self, history: list[dict], ctx: dict):
        prep = prepare(history)
        init = ctx.get("initial_durable") or {}
        self.identities = {i["token"]: {"username": i["username"], "profile": i["profile"]}
                           for i in init.get("identities") or []
                           if isinstance(i, dict) and i.get("username") and i.get("profile")}
        self.ops = [LockOp(op, self.identities) for op in prep.ops]
        self.by_key: dict[str, list[LockOp]] = {}
        for lo in self.ops:
            if lo.key is not None:
                self.by_key.setdefault(lo.key, []).append(lo)
        self.seeded: dict[str, dict] = {}
        for entry in init.get("locks") or []:
            k = key_of_request(entry)
            if k is not None and isinstance(entry.get("lock"), dict):
                self.seeded[k] = entry["lock"]
        self.final: dict[str, dict] | None = None
        if prep.final_durable is not None:
            self.final = {key_of_request(e): e.get("lock") for e in prep.final_durable.get("locks") or []}
        self.final_branches = {} if prep.final_durable is None else {
            (b.get("remote"), b.get("org"), b.get("repo"), b.get("name")): b.get("head")
            for b in prep.final_durable.get("branches") or []}
        self.final_index = prep.final_index

    def seeded_generation(self, key: str) -> int:
        return R.lock_generation(self.seeded.get(key))


def findings() -> Findings:
    return Findings()


def add(f: Findings, rule: str, type_: str, explanation: str, ops, **data) -> None:
    """An anomaly that names its rule (the spec section) and its minimal ops."""
    f.add(type_, f"[{rule}] {explanation}", ops, rule=rule, **data)
