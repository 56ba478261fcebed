"""Never two healthy owners of one issue (spec: "the absence of healthy foreign
ownership"; "a live foreign-owned lock; takeover is not a recovery path").

Per issue, ok writes are ordered by generation. When a write hands the issue
to another identity (a takeover), the lock it replaced must not have been
live at the store's own decision time:

* ``takeover-of-live-lock``: the replaced lock (the one at the previous
  generation, seen in full) was canonical with a recorded expiry after the
  takeover's ``decided_at``;
* ``replaced-live-foreign-lock``: the writer's own ``prior`` says it replaced
  a canonical, live lock of another identity;
* ``two-owners-at-one-generation``: two writes of different sessions claim
  the same generation.

Vacuous (unknown) when no takeover was ever attempted.
"""

from __future__ import annotations

from backends.issuelock.contract import reader as R
from checkers.issuelock._model import Model, add, findings, ms

RULE = "Recovery: the absence of healthy foreign ownership; takeover is not a recovery path"


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    attempts = 0
    for key, ops in m.by_key.items():
        chain: dict[int, object] = {}
        ambiguous: set[int] = set()   # generations written more than once: no unique predecessor to judge
        for lo in ops:
            if lo.f in ("bootstrap", "lock") and lo.type in ("ok", "fail") and lo.env.get("prior", lo.env.get(
                    "lock")) is not None:
                attempts += 1
            w = lo.wrote
            if w is None:
                continue
            g = R.lock_generation(w)
            other = chain.get(g)
            if other is not None:
                ambiguous.add(g)
                if R.task_session_id(other.wrote) != R.task_session_id(w):
                    add(f, RULE, "two-owners-at-one-generation",
                        f"{key}: sessions {R.task_session_id(other.wrote)} and {R.task_session_id(w)} both hold "
                        f"generation {g}", other.ops + lo.ops)
            chain.setdefault(g, lo)
            prior = lo.env.get("prior") or {}
            claimant = R.lock_claimant(w)
            if (prior.get("contract") == "canonical" and prior.get("expiration_state") == "recorded"
                    and not R.same_identity(prior.get("claimant"), claimant) and lo.at is not None
                    and (ms(prior.get("expires_at")) or 0) > lo.at):
                add(f, RULE, "replaced-live-foreign-lock",
                    f"{key}: {lo.f} for {claimant} replaced {prior.get('claimant')}'s lock gen "
                    f"{prior.get('lock_generation')} live until {prior.get('expires_at')} at {lo.env.get('decided_at')}",
                    lo.ops, prior=prior)
        for g, lo in sorted(chain.items()):
            before = chain.get(g - 1)
            if before is None or lo.at is None or g - 1 in ambiguous:
                continue
            old, new = before.wrote, lo.wrote
            if R.same_identity(R.lock_claimant(old), R.lock_claimant(new)):
                continue
            if R.is_live(old, lo.at):
                add(f, RULE, "takeover-of-live-lock",
                    f"{key}: {lo.f} gave generation {g} to {R.lock_claimant(new)} at {lo.env.get('decided_at')} while "
                    f"{R.lock_claimant(old)}'s generation {g - 1} was live until "
                    f"{old['work_lease']['expires_at']}", before.ops + lo.ops)
    if attempts == 0:
        f.unknown("no bootstrap or re-lock ever met an existing lock: takeover was not exercised")
    return f.result({"takeover_attempts": attempts})
