"""The issue-lock checkers: pure functions ``history -> verdict``, one rule each.

Every anomaly names its rule (a section of ``../shared/spec/issue-lock-contract.md``)
in ``data.rule`` and at the head of its explanation, and cites the minimal ops.
A checker whose subject never occurred in the run is ``unknown`` (no vacuous
verdicts). ``run_checkers(history, ctx)`` composes them (invalid > unknown > valid).
"""

from __future__ import annotations

from checkers.compose import compose
from checkers.issuelock import expiry, fencing, generation, next_action, owners, readonly, recovery, shape

ISSUELOCK_CHECKERS = {
    "shape_agreement": shape.check,
    "lock_generation": generation.check,
    "session_fencing": fencing.check,
    "single_owner": owners.check,
    "explicit_expiry": expiry.check,
    "sanctioned_recovery": recovery.check,
    "read_only": readonly.check,
    "next_action": next_action.check,
}


def run_checkers(history: list[dict], ctx: dict | None = None, checkers: dict | None = None) -> dict:
    from checkers.records import shared_preparation

    with shared_preparation(history):
        return compose(checkers if checkers is not None else ISSUELOCK_CHECKERS)(history, ctx or {})


__all__ = ["ISSUELOCK_CHECKERS", "run_checkers"]
