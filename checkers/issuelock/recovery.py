"""Recovery only through the sanctioned path (spec: "Recovering an existing incomplete
bootstrap lock", "Refusals").

* ``refusal-code-not-in-table``: a recovery refused with a code outside the
  spec's refusal table;
* ``refusal-code-wrong``: the code is not the one the contract's decision
  gives for the lock, identity, binding and head the store itself reported
  seeing (``lock``, ``binding`` of the reply); a success where it gives a
  refusal is ``recovered-against-refusal``;
* ``recovery-record-incomplete``: a recovered lock without both sides of the
  transition (``bootstrap_lock_recovery``: prior contract, missing fields,
  generation, owning session, replacement session, preserved head) or whose
  sides disagree with the prior lock and the new one;
* ``branch-moved``: the head after recovery (reply, later reads of that branch
  with no commit in between, the final export) is not the preserved head;
* ``unsanctioned-recovery``: a lock carrying a recovery block that no recovery
  produced, a re-lock of a branch that carries commits (the ordinary path is
  gone once base-equivalence is), or a heartbeat / renewal that turned an
  incomplete lock into a canonical one.

Vacuous (unknown) when no recovery succeeded.
"""

from __future__ import annotations

from backends.issuelock.contract import codes as C
from backends.issuelock.contract import fields as F
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from checkers.issuelock._model import Model, add, findings

RULE = "Recovering an existing incomplete bootstrap lock: refusals and both sides of the transition"
NOT_DECISIONS = (C.INVALID_REQUEST, C.STORE_UNAVAILABLE, C.OUTCOME_UNKNOWN)


def _record_problems(lo) -> list[str]:
    new, prior = lo.wrote, lo.env.get("prior_lock")
    block = new.get(F.RECOVERY_BLOCK)
    if not isinstance(block, dict):
        return ["no bootstrap_lock_recovery block"]
    out = [f"missing {k}" for k in F.RECOVERY_FIELDS if k not in block]
    expect = {"replacement_task_session_id": R.task_session_id(new), "preserved_head": lo.req.get("expected_head")}
    if isinstance(prior, dict):
        expect.update(prior_contract=R.lock_contract(prior), prior_missing_fields=R.missing_fields(prior),
                      prior_owning_session=R.task_session_id(prior),
                      prior_generation=prior.get("lock_generation") if F.is_int(prior.get("lock_generation"))
                      else None)
    out += [f"{k} is {block.get(k)!r}, not {v!r}" for k, v in expect.items() if k in block and block[k] != v]
    if (new.get("lock_provenance") or {}).get("writer") != "recover":
        out.append("lock_provenance.writer is not recover")
    return out


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    recovered = 0
    recoveries: dict = {}   # (key, replacement session) -> op
    for lo in m.ops:
        if lo.f != "recover" or lo.type not in ("ok", "fail") or lo.key is None:
            continue
        if lo.type == "fail" and lo.code in NOT_DECISIONS:
            continue
        if lo.type == "fail" and lo.code not in C.REFUSAL_CODES:
            add(f, RULE, "refusal-code-not-in-table", f"recovery of {lo.key} refused {lo.code!r}, which is not in "
                f"the spec's refusal table", lo.ops, code=lo.code)
            continue
        req = lo.req
        lock = lo.env.get("prior_lock") if lo.wrote is not None else lo.env.get("lock")  # what the decision saw
        if lock is not None and "remote" not in lock:
            lock = None if lo.code == C.NO_DURABLE_LOCK else lock
        if lo.at is not None and (lock is None or "remote" in lock):
            want = G.recovery_decision(lock, lo.identity, IssueKey.of(req), req.get("branch_name"),
                                       req.get("worktree_path"), req.get("expected_head"), lo.at, lo.env.get("binding"))
            got = lo.code if lo.type == "fail" else None
            want_code = want.code if want else None
            if got != want_code:
                kind = "recovered-against-refusal" if got is None else "refusal-code-wrong"
                add(f, RULE, kind, f"recovery of {lo.key} answered {got or 'success'}; for the lock, identity, "
                    f"binding and head it reported, the contract decides {want_code or 'recover'}", lo.ops,
                    got=got, want=want_code)
        if lo.wrote is None:
            continue
        recovered += 1
        problems = _record_problems(lo)
        if problems:
            add(f, RULE, "recovery-record-incomplete", f"recovered lock {lo.key}: {'; '.join(problems)}", lo.ops)
        if lo.env.get("head_after") != req.get("expected_head"):
            add(f, RULE, "branch-moved", f"recovery of {lo.key} preserved {req.get('expected_head')} but the "
                f"branch is at {lo.env.get('head_after')} after it", lo.ops)
        recoveries[(lo.key, R.task_session_id(lo.wrote))] = lo
    _branch_kept(m, f)
    _sanctioned(m, f, recoveries)
    if recovered == 0:
        f.unknown("no recovery succeeded: the recovery path was not exercised")
    return f.result({"recovered": recovered})


def _observations(ops) -> list:
    """(op, branch, head) of every reply that shows a branch head, in completion order."""
    out = []
    for lo in ops:
        if lo.type != "ok" and not (lo.f == "recover" and lo.type == "fail"):
            continue
        b = lo.env.get("binding") or {}
        if b.get("branch_name") and b.get("branch_head") and lo.f in ("inspect", "recover"):
            out.append((lo, b["branch_name"], b["branch_head"]))
        if lo.f == "recover" and lo.wrote is not None and lo.env.get("head_after"):
            out.append((lo, lo.req.get("branch_name"), lo.env["head_after"]))
        if lo.f == "commit" and lo.type == "ok":
            out.append((lo, lo.env.get("branch_name"), (lo.env.get("commit") or {}).get("head")))
    return sorted(out, key=lambda x: x[0].op.cp)


def _branch_kept(m: Model, f) -> None:
    """A branch moves only by a commit. Two observations of one branch head
    that differ with no commit overlapping the span between them, while a
    recovery (of any outcome) did overlap it, mean the recovery moved it."""
    for key, ops in m.by_key.items():
        recovers = [lo for lo in ops if lo.f == "recover"]
        if not recovers:
            continue
        commits = [lo for lo in ops if lo.f == "commit" and lo.type != "fail"]
        last: dict = {}
        obs = _observations(ops)
        final = []
        if m.final_index is not None:
            repo = tuple(key.split("/")[:3])
            final = [(None, branch, m.final_branches.get((*repo, branch))) for branch in {b for _, b, _ in obs}]
        for lo, branch, head in obs + final:
            prev = last.get(branch)
            last[branch] = (lo, head)
            if prev is None or prev[1] == head or head is None or (lo is not None and lo.f == "commit"):
                continue  # unchanged, or moved by the commit that reports the new head
            a, end = prev[0], (lo.op.cp if lo is not None else float("inf"))
            start = a.op.ip

            def overlaps(x) -> bool:
                return x is not a and x is not lo and x.op.ip < end and (x.op.cp is None or x.op.cp > start)
            if any(overlaps(c) for c in commits):
                continue
            suspects = [r for r in recovers if overlaps(r) or r is a or r is lo]
            if suspects:
                add(f, RULE, "branch-moved", f"{key}: branch {branch} went from {prev[1]} to {head} with no commit "
                    f"between, across {len(suspects)} recovery call(s)",
                    a.ops + (lo.ops if lo is not None else [m.final_index]) + [i for r in suspects for i in r.ops],
                    before=prev[1], after=head)


def _sanctioned(m: Model, f, recoveries: dict) -> None:
    recover_attempts = {}
    for lo in m.ops:
        if lo.f == "recover" and not lo.dry and lo.type != "fail":
            recover_attempts.setdefault(lo.key, []).append(lo)
    for lo in m.ops:
        lock = lo.lock if lo.lock is not None else None
        if isinstance(lock, dict) and isinstance(lock.get(F.RECOVERY_BLOCK), dict) and lo.f != "recover":
            made = recoveries.get((lo.key, lock[F.RECOVERY_BLOCK].get("replacement_task_session_id")))
            if made is None and not any(r.op.ip < (lo.op.cp or 0) for r in recover_attempts.get(lo.key, [])):
                add(f, RULE, "unsanctioned-recovery", f"{lo.f} shows {lo.key} with a recovery block no recovery "
                    f"wrote", lo.ops)
        if lo.f == "lock" and lo.wrote is not None:
            b = lo.env.get("binding") or {}
            if b.get("branch_head") != b.get("base_head"):
                add(f, RULE, "unsanctioned-recovery", f"re-lock of {lo.key} succeeded on branch "
                    f"{b.get('branch_name')} carrying commits (head {b.get('branch_head')} != base)", lo.ops)
        if lo.f in ("heartbeat", "renew") and lo.wrote is not None and \
                (lo.env.get("prior") or {}).get("contract") not in (None, "canonical"):
            add(f, RULE, "unsanctioned-recovery", f"{lo.f} of {lo.key} turned a "
                f"{lo.env['prior']['contract']} lock into a canonical one", lo.ops)
