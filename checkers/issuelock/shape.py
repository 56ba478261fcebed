"""Shape agreement: every lock a writer reported as created is the one canonical shape.

Spec: "Every author issue lock has exactly one shape"; #953: bootstrap once
wrote a thinner record that every gate then refused. For every lock an ok
``bootstrap``, ``lock`` or ``recover`` reported as created:

* ``created-lock-not-canonical``: the canonical reader finds missing fields;
* ``created-lock-refused-by-gate``: a gate refuses it for its shape
  (heartbeat at its acquisition, renewal at its expiry, re-lock on a
  base-equivalent binding, the #447 create-PR guard, create-PR on a branch
  with work) - evaluated with the contract's own gate functions;
* ``gate-refused-created-lock``: in the history, a heartbeat / renew / commit /
  create-PR by the token of a created lock was refused for the lock's shape
  (``incomplete_issue_lock_contract`` or the create-PR guard);
* ``read-back-differs``: a later read (inspect, recovery evidence, the final
  export) shows that issue's lock at the created generation with other content.
"""

from __future__ import annotations

from backends.issuelock.contract import codes as C
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from checkers.issuelock._model import MINTERS, SESSION_OPS, Model, add, findings, ms

RULE = "The contract: one canonical shape for every writer (#953)"


def _gate_refusals(lock: dict) -> list[str]:
    claimant, session = R.lock_claimant(lock), R.task_session_id(lock)
    lease = lock.get("work_lease") or {}
    at, exp = ms(lease.get("acquired_at")), R.expires_at_ms(lock)
    key = IssueKey.of(lock)
    base_equivalent = {"branch_head": "0" * 40, "base_head": "0" * 40, "branch_issue": key.path,
                       "worktree": {"exists": True, "registered": True, "branch": lock.get("branch_name")}}
    with_work = dict(base_equivalent, branch_head="1" * 40)
    checks = {
        "heartbeat": lambda: G.assess_heartbeat(lock, claimant, session, at),
        "renew": lambda: G.assess_renew(lock, claimant, session, exp),
        "re-lock": lambda: G.assess_relock(lock, claimant, key, lock.get("branch_name"), lock.get("worktree_path"),
                                           at, base_equivalent),
        "create-PR guard": lambda: G.assess_lock_file_for_create_pr(lock),
        "create-PR": lambda: G.assess_create_pr(lock, claimant, session, at, with_work),
    }
    out = []
    for name, check in checks.items():
        try:
            refusal = check()
        except (TypeError, KeyError, ValueError) as e:
            out.append(f"{name}: crashed ({type(e).__name__})")
            continue
        if refusal is not None:
            out.append(f"{name}: {refusal.code}")
    return out


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    created = [lo for lo in m.ops if lo.f in MINTERS and lo.wrote is not None]
    by_session = {}
    for lo in created:
        lock = lo.wrote
        missing = R.missing_fields(lock)
        if missing:
            add(f, RULE, "created-lock-not-canonical",
                f"{lo.f} reported lock {lo.key} gen {R.lock_generation(lock)} as created, but the canonical reader "
                f"finds it missing {', '.join(missing)}", lo.ops, missing_fields=missing, lock=lock)
            continue
        refused = _gate_refusals(lock)
        if refused:
            add(f, RULE, "created-lock-refused-by-gate",
                f"{lo.f} created lock {lo.key} gen {R.lock_generation(lock)}, which the gates refuse: "
                f"{'; '.join(refused)}", lo.ops, refusals=refused)
        if R.task_session_id(lock):
            by_session[(lo.key, R.task_session_id(lock))] = lo
    sessions = {(lo.key, lo.env.get("task_session_id")): lo for lo in created if lo.env.get("task_session_id")}
    sessions.update(by_session)
    for lo in m.ops:
        if lo.f not in SESSION_OPS or lo.type != "fail":
            continue
        maker = sessions.get((lo.key, lo.session()))
        if maker is not None and lo.code in (C.INCOMPLETE, C.CREATE_PR_GUARD) and maker.precedes(lo):
            add(f, RULE, "gate-refused-created-lock",
                f"{lo.f} with the task_session_id {maker.f} returned for {lo.key} was refused {lo.code}: the "
                f"writer reported a lock the gate does not accept", maker.ops + lo.ops)
    written = {(lo.key, R.lock_generation(lo.wrote)): lo for lo in created}
    created_ids = {id(lo) for lo in created}
    for lo in m.ops:
        for lock in (lo.lock, lo.env.get("prior_lock")):
            if not isinstance(lock, dict) or id(lo) in created_ids:
                continue
            w = written.get((lo.key, R.lock_generation(lock)))
            if w is not None and w.precedes(lo) and lock != w.wrote:
                add(f, RULE, "read-back-differs",
                    f"{lo.f} read {lo.key} gen {R.lock_generation(lock)} with other content than {w.f} reported "
                    f"creating", w.ops + lo.ops, read=lock, created=w.wrote)
    for (key, gen), w in written.items():
        final = (m.final or {}).get(key)
        if final is not None and R.lock_generation(final) == gen and final != w.wrote:
            add(f, RULE, "read-back-differs", f"the final export holds {key} gen {gen} with other content than "
                f"{w.f} reported creating", w.ops + [m.final_index], read=final, created=w.wrote)
    if not created:
        f.unknown("no writer reported a lock as created: shape agreement was not exercised")
    return f.result({"created": len(created)})
