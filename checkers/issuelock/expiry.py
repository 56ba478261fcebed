"""Expiration is explicit (spec: "A lock with no recorded expiry is not 'not yet expired'").

``expiration_state`` is ``recorded``, ``missing`` or ``unparseable``; only a
recorded expiry in the future makes a lock live. Anomalies:

* ``inspect-misreports-lock``: inspect's ``expiration_state``, ``live``,
  ``contract``, ``missing_fields`` or ``recommended_action`` differ from the
  contract's reading of the very lock (and binding) it returned;
* ``unexpired-lock-blocked``: a bootstrap, re-lock or recovery refused as if
  a live lock held the issue (``healthy_foreign_lock`` / ``already_canonical``)
  against a lock whose expiry is missing, unparseable, or already past at the
  decision (such a lock is eligible for recovery and for takeover);
* ``missing-expiry-not-expired``: a renewal refused ``lease_not_expired`` or a
  heartbeat accepted on a lock without a recorded expiry.

Vacuous (unknown) when no operation ever met a lock without a recorded expiry.
"""

from __future__ import annotations

from backends.issuelock.contract import codes as C
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from checkers.issuelock._model import Model, add, findings, ms

RULE = "Expiration is explicit: a lock with no recorded expiry is not 'not yet expired'"
BLOCKING = (C.HEALTHY_FOREIGN_LOCK, C.ALREADY_CANONICAL)


def _summary_state(lo) -> tuple[str | None, int | None, str | None]:
    """(expiration_state, expires_at ms, contract) of the lock a reply names."""
    lock = lo.env.get("lock")
    if isinstance(lock, dict) and "remote" in lock:
        return R.expiration_state(lock), R.expires_at_ms(lock), R.lock_contract(lock)
    if isinstance(lock, dict):
        return lock.get("expiration_state"), ms(lock.get("expires_at")), lock.get("contract")
    return None, None, None


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    met = 0
    for lo in m.ops:
        if lo.type not in ("ok", "fail") or lo.key is None:
            continue
        state, exp, contract = _summary_state(lo)
        if state in ("missing", "unparseable"):
            met += 1
        if lo.f == "inspect" and lo.type == "ok":
            lock, binding = lo.env.get("lock"), lo.env.get("binding")
            want = {"expiration_state": R.expiration_state(lock) if lock else None,
                    "live": R.is_live(lock, lo.at) if lo.at is not None else lo.env.get("live"),
                    "contract": R.lock_contract(lock), "missing_fields": R.missing_fields(lock) if lock else [],
                    "recommended_action": G.recommended_action(lock, lo.identity, lo.at, binding)
                    if lo.at is not None else lo.env.get("recommended_action")}
            wrong = {k: (lo.env.get(k), v) for k, v in want.items() if lo.env.get(k) != v}
            if wrong:
                add(f, RULE, "inspect-misreports-lock",
                    f"inspect of {lo.key} reported " + ", ".join(f"{k}={got!r} (the contract reads {w!r})"
                                                               for k, (got, w) in wrong.items()), lo.ops,
                    expiration_state=want["expiration_state"])
            continue
        if lo.type == "fail" and lo.code in BLOCKING and lo.f in ("bootstrap", "lock", "recover"):
            # recovery refuses its owner's canonical lock whether or not it expired (already_canonical)
            needs_live = not (lo.f == "recover" and lo.code == C.ALREADY_CANONICAL)
            unexpired = state == "recorded" and contract == "canonical" and (
                not needs_live or lo.at is None or exp is None or exp > lo.at)
            if not unexpired:
                add(f, RULE, "unexpired-lock-blocked",
                    f"{lo.f} of {lo.key} refused {lo.code} against a lock with expiration_state {state} "
                    f"(contract {contract}) at {lo.env.get('decided_at')}", lo.ops, expiration_state=state)
        if lo.f == "renew" and lo.code == C.LEASE_NOT_EXPIRED and state != "recorded":
            add(f, RULE, "missing-expiry-not-expired",
                f"renew of {lo.key} refused lease_not_expired on a lock with expiration_state {state}", lo.ops)
        if lo.f == "heartbeat" and lo.type == "ok" and (lo.env.get("prior") or {}).get("expiration_state") not in (
                None, "recorded"):
            add(f, RULE, "missing-expiry-not-expired",
                f"heartbeat of {lo.key} accepted a lock with expiration_state "
                f"{lo.env['prior']['expiration_state']}", lo.ops)
    if met == 0:
        f.unknown("no operation met a lock with a missing or unparseable expiry: explicit expiry was not exercised")
    return f.result({"met_unrecorded_expiry": met})
