"""The workload-coverage table of the ``issue-lock`` workload (the claims
workload's is ``workloads.coverage``; the runner's gate reads both alike).

A path is one way through the issue-lock contract: an operation and the
answer that shows it was taken (a bootstrap that took the lock, one
refused as incomplete or as a healthy foreign lock, a stale-session
heartbeat, each recovery refusal...). ``attempted`` counts the requests that
aim at the path (where the request itself says so: a ghost token aims at
``identity_unresolved``; otherwise every request of that operation),
``completed`` the replies that show it.

*Requested* (a valid run that never completed it is ``unknown``) are only the
paths every agent cycle takes, whatever the store and the seed: inspect,
a bootstrap that takes a lock, heartbeat. The others depend on the seed's draws
and on races (who locks an issue first), so they are shown, never required;
the checkers that need one of them (``sanctioned_recovery``: a recovery that
succeeded) say so themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from backends.issuelock.contract import codes as C
from workloads.coverage import pairs
from workloads.issuelock import GHOST_TOKEN, UNKNOWN_TOKEN, UNLOCKED_ISSUE


@dataclass(frozen=True)
class Call:
    f: str
    req: dict
    type: str     # ok / fail / info (info also when it never completed)
    code: str | None


@dataclass(frozen=True)
class Path:
    name: str
    attempted: Callable[[Call], bool]
    completed: Callable[[Call], bool]
    every_cycle: bool = False


def _op(*names: str) -> Callable[[Call], bool]:
    return lambda c: c.f in names


def _ok(c: Call) -> bool:
    return c.type == "ok"


def _code(code: str) -> Callable[[Call], bool]:
    return lambda c: c.type == "fail" and c.code == code


def _recover(dry: bool) -> Callable[[Call], bool]:
    return lambda c: c.f == "recover" and bool(c.req.get("dry_run")) is dry


def _refusal(code: str) -> Path:
    aims = {C.IDENTITY_UNRESOLVED: lambda c: c.req.get("agent_token") in (GHOST_TOKEN, UNKNOWN_TOKEN),
            C.NO_DURABLE_LOCK: lambda c: c.req.get("issue_number") == UNLOCKED_ISSUE,
            C.BINDING_MISMATCH: lambda c: str(c.req.get("worktree_path", "")).endswith("-elsewhere")}
    aim = aims.get(code, lambda c: True)
    return Path(f"recover refused: {code}", lambda c: c.f == "recover" and aim(c), _code(code))


PATHS: tuple[Path, ...] = (
    Path("inspect", _op("inspect"), _ok, every_cycle=True),
    Path("bootstrap (lock taken)", _op("bootstrap"), _ok, every_cycle=True),
    Path("bootstrap refused: incomplete lock", _op("bootstrap"), _code(C.INCOMPLETE)),
    Path("bootstrap refused: healthy foreign lock", _op("bootstrap"), _code(C.HEALTHY_FOREIGN_LOCK)),
    Path("lock (re-lock a base-equivalent binding)", _op("lock"), _ok),
    Path("lock refused: not base-equivalent", _op("lock"), _code(C.NOT_BASE_EQUIVALENT)),
    Path("heartbeat", _op("heartbeat"), _ok, every_cycle=True),
    Path("heartbeat refused: stale session", _op("heartbeat"), _code(C.STALE_SESSION)),
    Path("heartbeat refused: lease expired", _op("heartbeat"), _code(C.LEASE_EXPIRED)),
    Path("renew an expired lease", _op("renew"), _ok),
    Path("renew refused: lease not expired", _op("renew"), _code(C.LEASE_NOT_EXPIRED)),
    Path("commit", _op("commit"), _ok),
    Path("create-pr", _op("create-pr"), _ok),
    Path("recover dry run", _recover(True), _ok),
    Path("recover (sanctioned)", _recover(False), _ok),
    *(_refusal(code) for code in C.REFUSAL_CODES),
)


def _calls(history: list[dict]) -> list[Call]:
    out = []
    for inv, done in pairs(history):
        done = done or {}
        req = inv.get("value") if isinstance(inv.get("value"), dict) else {}
        value = done.get("value") if isinstance(done.get("value"), dict) else {}
        env = value.get("envelope") if isinstance(value.get("envelope"), dict) else {}
        out.append(Call(str(inv.get("f")), req, done.get("type", "info"),
                        env.get("refusal_code") or env.get("reason_code")))
    return out


def coverage(history: list[dict]) -> dict:
    """``{path: {"requested", "attempted", "completed"}}`` in report order."""
    calls = _calls(history)
    clients = bool(calls)
    table = {p.name: {"requested": p.every_cycle and clients, "attempted": 0, "completed": 0} for p in PATHS}
    for c in calls:
        for p in PATHS:
            if p.attempted(c):
                table[p.name]["attempted"] += 1
                table[p.name]["completed"] += int(p.completed(c))
    return table
