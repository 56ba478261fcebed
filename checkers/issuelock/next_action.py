"""Bootstrap's reported next action matches the state it returned (spec, "Required
ordering": "Bootstrap's reported next action always matches the state it actually
returned"; a partial lock "never reports implementation_allowed: true").

For every bootstrap reply:

* ``next-action-mismatch``: ``exact_next_action.op`` is not what the contract
  names for the state returned (success -> heartbeat; an incomplete lock ->
  recover, or lock while the branch is base-equivalent; ...), or its request
  does not name that state's binding, head or session;
* ``implementation-allowed-wrongly``: ``implementation_allowed`` is true on a
  failure or for a lock the canonical reader does not accept, or false on a
  success;
* ``state-contradicts-reply``: an ``incomplete_issue_lock_contract`` reply
  whose returned lock is canonical or names no missing fields.
"""

from __future__ import annotations

from backends.issuelock.contract import codes as C
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from checkers.issuelock._model import Model, add, findings

RULE = "Required ordering: bootstrap's reported next action always matches the state it returned"


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    seen = 0
    for lo in m.ops:
        if lo.f != "bootstrap" or not lo.env or lo.code in (C.INVALID_REQUEST, C.STORE_UNAVAILABLE,
                                                             C.OUTCOME_UNKNOWN):
            continue
        seen += 1
        env, success = lo.env, lo.env.get("success") is True
        binding = env.get("binding")
        lock = env.get("lock")
        full = lock if isinstance(lock, dict) and "remote" in lock else None
        want = G.bootstrap_next_action(success, lo.code, binding)
        nxt = env.get("exact_next_action") or {}
        problems = []
        if nxt.get("op") != want:
            problems.append(f"names {nxt.get('op')!r}, the state returned calls for {want!r}")
        req = nxt.get("request") or {}
        if want == C.NEXT_HEARTBEAT and req.get("task_session_id") != env.get("task_session_id"):
            problems.append("its heartbeat names another session than the one returned")
        if want in (C.NEXT_RECOVER, C.NEXT_LOCK) and isinstance(binding, dict):
            if req.get("branch_name") != binding.get("branch_name") or \
                    req.get("worktree_path") != binding.get("worktree_path"):
                problems.append("its request names another binding than the lock's")
            if want == C.NEXT_RECOVER and req.get("expected_head") != binding.get("branch_head"):
                problems.append("its expected_head is not the branch head returned")
        if problems:
            add(f, RULE, "next-action-mismatch", f"bootstrap of {lo.key} ({lo.code or 'success'}): "
                f"{'; '.join(problems)}", lo.ops, next_action=nxt, want=want)
        allowed = env.get("implementation_allowed")
        if allowed is True and (not success or full is None or not R.is_canonical(full)):
            add(f, RULE, "implementation-allowed-wrongly", f"bootstrap of {lo.key} said implementation_allowed "
                f"true with {lo.code or 'a lock the canonical reader refuses'}", lo.ops,
                missing_fields=R.missing_fields(full) if full else None)
        elif allowed is not True and success:
            add(f, RULE, "implementation-allowed-wrongly", f"bootstrap of {lo.key} succeeded without "
                f"implementation_allowed", lo.ops)
        if lo.code == C.INCOMPLETE:
            named = (env.get("details") or {}).get("missing_fields")
            canonical = full is not None and R.is_canonical(full) or \
                (isinstance(lock, dict) and lock.get("contract") == "canonical")
            if canonical or not named:
                add(f, RULE, "state-contradicts-reply", f"bootstrap of {lo.key} said {C.INCOMPLETE} but returned "
                    f"{'a canonical lock' if canonical else 'no missing fields'}", lo.ops)
    if seen == 0:
        f.unknown("no bootstrap replied: its next action was not exercised")
    return f.result({"bootstraps": seen})
