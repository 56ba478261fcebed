"""Inspect and dry-run write nothing (spec: ``gitea_inspect_issue_lock_contract`` "is
strictly read-only"; ``dry_run=True`` previews "without writing").

* ``read-reported-change``: an inspect or a dry-run recovery replied
  ``state`` other than ``unchanged``;
* ``lock-changed-without-a-write``: two observations of an issue's lock (inspect
  replies, recovery evidence, the final export) differ although no write that
  could have changed it (an ok, info or open bootstrap, re-lock, heartbeat,
  renewal or real recovery) overlapped the span from the first of their
  invocations to the last of their replies; the anomaly names the inspects,
  dry runs and refused calls that ran in that span;
* ``generation-outruns-writes``: a lock's generation exceeds the seeded one
  plus the number of write attempts on that issue made before it was seen.

Vacuous (unknown) when no inspect or dry run ran.
"""

from __future__ import annotations

from backends.issuelock.contract import reader as R
from checkers.issuelock._model import Model, add, findings

RULE = "Inspection is strictly read-only; dry_run previews the decision without writing"


def _observed_lock(lo):
    """(True, lock-or-None) when the op's reply shows the issue's whole lock."""
    if lo.type != "ok" and not (lo.f == "recover" and lo.type == "fail"):
        return False, None
    if lo.f == "inspect" and lo.type == "ok":
        return True, lo.env.get("lock")
    if lo.f == "recover" and "lock" in lo.env and lo.env.get("binding") is not None:
        lock = lo.env.get("lock")
        if lo.wrote is None and (lock is None or "remote" in lock):
            return True, lock
    return False, None


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    reads = 0
    for key, ops in m.by_key.items():
        writes = [lo for lo in ops if lo.is_write_attempt]
        seed_gen = m.seeded_generation(key)
        obs = []
        for lo in ops:
            if lo.f == "inspect" or lo.dry:
                reads += 1
                if lo.type == "ok" and lo.env.get("state") != "unchanged":
                    add(f, RULE, "read-reported-change", f"{lo.f} of {key} replied state "
                        f"{lo.env.get('state')!r}", lo.ops)
            seen, lock = _observed_lock(lo)
            if not seen:
                continue
            obs.append((lo, lock))
            n_writes = sum(1 for w in writes if w.op.ip < lo.op.cp)
            if lock is not None and R.lock_generation(lock) > seed_gen + n_writes:
                add(f, RULE, "generation-outruns-writes", f"{lo.f} saw {key} at generation "
                    f"{R.lock_generation(lock)}, but only {n_writes} write(s) on it had started (seeded generation "
                    f"{seed_gen})", lo.ops + _readers_before(ops, lo), writes=n_writes)
        obs.sort(key=lambda x: x[0].op.cp)
        pairs = list(zip(obs, obs[1:]))
        if m.final is not None and obs:
            pairs.append((obs[-1], (None, m.final.get(key))))
        for (a, la), (b, lb) in pairs:
            # each read saw the lock somewhere in its own window: a write overlapping either window, or
            # between them, may have come between the two looks (b may have begun first and been answered
            # last: a long call)
            start = a.op.ip if b is None else min(a.op.ip, b.op.ip)
            end = b.op.cp if b is not None else float("inf")
            overlap = [w for w in writes if w.op.ip < end and (w.op.cp is None or w.op.cp > start)]
            if overlap or la == lb:
                continue
            between = [lo for lo in ops if start <= lo.op.ip < end and lo is not a and lo is not b]
            idx = a.ops + (b.ops if b is not None else [m.final_index]) + [i for lo in between for i in lo.ops]
            add(f, RULE, "lock-changed-without-a-write",
                f"{key}: gen {R.lock_generation(la)} then gen {R.lock_generation(lb)} with only "
                f"{', '.join(sorted({_name(lo) for lo in between})) or 'nothing'} between", idx,
                before=la, after=lb)
    if reads == 0:
        f.unknown("no inspect or dry run ran: read-only behaviour was not exercised")
    return f.result({"reads": reads})


def _name(lo) -> str:
    return "dry-run recover" if lo.dry else (lo.f if lo.type != "fail" else f"refused {lo.f}")


def _readers_before(ops, lo) -> list[int]:
    return [i for o in ops if (o.f == "inspect" or o.dry) and o.op.cp is not None and o.op.cp < lo.op.cp
            for i in o.ops][-6:]
