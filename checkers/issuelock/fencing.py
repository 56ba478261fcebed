"""``task_session_id`` is never null and it fences (spec: "the ownership fencing token - never null").

* ``null-task-session-id``: a sanctioned writer reported success with a lock
  (or a reply) whose ``task_session_id`` is null or absent;
* ``stale-token-accepted``: a heartbeat, renewal, commit or create-PR
  succeeded with a token that a later lock-minting write (bootstrap, re-lock,
  recovery) of the same issue had replaced before the call was made;
* ``wrong-session-written``: a heartbeat or renewal succeeded but the lock it
  reports carries another session than the caller's.

Vacuous (unknown) when no call ever used a replaced token.
"""

from __future__ import annotations

from backends.issuelock.contract import reader as R
from checkers.issuelock._model import MINTERS, SESSION_OPS, Model, add, findings

RULE = "The contract: task_session_id is the ownership fencing token, never null"


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    stale_uses = 0
    for key, ops in m.by_key.items():
        minted = []   # (op, session) of every ok lock-minting write
        for lo in ops:
            w = lo.wrote
            if w is None:
                continue
            if lo.f in MINTERS:
                s = R.task_session_id(w)
                if not s or not lo.env.get("task_session_id"):
                    add(f, RULE, "null-task-session-id",
                        f"{key}: {lo.f} reported success with a null task_session_id", lo.ops, lock=w)
                    continue
                minted.append((lo, s))
            elif lo.f in ("heartbeat", "renew") and R.task_session_id(w) != lo.session():
                add(f, RULE, "wrong-session-written",
                    f"{key}: {lo.f} by session {lo.session()} wrote a lock of session {R.task_session_id(w)}", lo.ops)
        for lo in ops:
            if lo.f not in SESSION_OPS or lo.type not in ("ok", "fail"):
                continue
            s = lo.session()
            est = [w for w, ws in minted if ws == s]
            if not est:
                continue
            replaced = [w for w, ws in minted if ws != s and est[0].precedes(w) and w.precedes(lo)]
            if not replaced:
                continue
            stale_uses += 1
            if lo.type == "ok":
                add(f, RULE, "stale-token-accepted",
                    f"{key}: {lo.f} succeeded with session {s}, which {replaced[-1].f} had replaced before the call",
                    est[0].ops + replaced[-1].ops + lo.ops, session=s)
    if stale_uses == 0:
        f.unknown("no call used a replaced task_session_id: fencing was not exercised")
    return f.result({"stale_token_uses": stale_uses})
