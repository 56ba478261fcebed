"""Clock floors: per namespace, backend decision time never goes backwards.

Contract §4: ``effective_now = max(physical_utc, durable_clock_floor)``; every
authoritative decision persists a floor at least ``effective_now`` before it
answers, and restart recovers it, so "a backward wall-clock step cannot
resurrect earlier effective time". Observable consequence: if op A's reply
carries a *persisted* decision time (acquire, renew, release, legacy write,
fresh publish) and A completed before op B was invoked, then every time B's
reply shows (including a read's ``observed_at``) is at least A's.

Reads are observations only (vectors.md §5.1 rule 3: a read does not persist),
so a read's time is checked but never raises the floor. A replayed publication
returns its stored envelope verbatim, old ``observed_at`` included (§8.6
commit step 2), so publishes are only used when provably fresh.

Also checked: an acquire's ``issued_at`` and every new ``expires_at`` come
from the decision time (vectors.md §5.1 rules 4 and 6).

A floor pushed far ahead (one process with a forward-skewed clock in an
in-process backend) is legal; it is reported in ``stats`` - the largest jump
and the leases it expired early - never as an anomaly.
"""

from __future__ import annotations

from ._common import Findings, Op, fmt_tuple, instant_ms, obj, observed_at, prepare, realtime_regressions

DECISION_FS = frozenset(("acquire", "renew", "release", "legacy-create", "legacy-transition"))
DEFAULT_JUMP_MS = 10_000


def fresh_publishes(ops: list[Op]) -> set[int]:
    """``ip`` of publishes whose reply cannot be a replay: the first attempt of
    its ``operation_id``, completed before any other attempt was invoked."""
    first: dict[str, Op] = {}
    second_ip: dict[str, int] = {}
    for op in ops:
        if op.f != "publish":
            continue
        oid = op.req.get("operation_id")
        if not isinstance(oid, str):
            continue
        if oid not in first:
            first[oid] = op
        elif oid not in second_ip:
            second_ip[oid] = op.ip
    out = set()
    for oid, op in first.items():
        nxt = second_ip.get(oid)
        if op.cp is not None and (nxt is None or op.cp < nxt):
            out.add(op.ip)
    return out


def decision_time(op: Op, fresh: set[int]) -> str | None:
    """The persisted decision time of a definite reply, or ``None``."""
    if not op.definite:
        return None
    if op.f in DECISION_FS or (op.f == "publish" and op.ip in fresh):
        return observed_at(op)
    return None


def check(history: list[dict], ctx: dict | None = None) -> dict:
    ctx = ctx or {}
    prep = prepare(history)
    fresh = fresh_publishes(prep.ops)
    out = Findings()

    def key_of(op: Op):
        return op.req.get("ledger_namespace") if op.f in DECISION_FS or op.f in ("read", "publish") else None

    def observe_of(op: Op):
        if not op.definite or (op.f == "publish" and op.ip not in fresh):
            return None
        return observed_at(op)

    for b, seen, floor, a in realtime_regressions(prep, key_of, lambda op: decision_time(op, fresh), observe_of):
        out.add(
            "decision-time-regressed",
            f"Namespace {b.req.get('ledger_namespace')}: {b.f} by process {b.process} observed {seen}, earlier "
            f"than {floor}, the decision time persisted by {a.f} (process {a.process}) that completed before "
            "it was invoked. The durable clock floor never decreases, across restarts too "
            "(contract §4: effective_now = max(physical, floor)).",
            [*a.indices, *b.indices],
            namespace=b.req.get("ledger_namespace"), floor=floor, observed=seen,
            ops_f=[a.f, b.f], tuple=list(b.tuple() or ()),
        )

    for op in prep.ops:
        if op.type != "ok" or op.f not in ("acquire", "renew") or op.env is None:
            continue
        claim, t = obj(op.result().get("claim")), observed_at(op)
        t_ms, dur = instant_ms(t), op.req.get("lease_duration_ms")
        if t_ms is None or not isinstance(dur, int):
            continue
        if op.f == "acquire" and claim.get("issued_at") != t:
            out.add(
                "issued-at-not-decision-time",
                f"Tuple {fmt_tuple(op.tuple())}: acquire decided at {t} but issued the claim at "
                f"{claim.get('issued_at')}. Acquire sets issued_at to the persisted decision time "
                "(contract §4; vectors.md §5.1 rule 6).",
                op.indices, tuple=list(op.tuple() or ()), observed_at=t, issued_at=claim.get("issued_at"),
            )
        if instant_ms(claim.get("expires_at")) != t_ms + dur:
            out.add(
                "expiry-not-from-decision-time",
                f"Tuple {fmt_tuple(op.tuple())}: {op.f} decided at {t} with lease_duration_ms {dur} set "
                f"expires_at {claim.get('expires_at')}. The new expiry is the persisted decision time plus "
                "the lease duration; client clocks never authorize a lease (contract §4).",
                op.indices, tuple=list(op.tuple() or ()), observed_at=t, expires_at=claim.get("expires_at"),
                lease_duration_ms=dur,
            )

    stats = _jump_stats(prep, fresh, int(ctx.get("floor_jump_threshold_ms", DEFAULT_JUMP_MS)))
    return out.result(stats)


def _jump_stats(prep, fresh: set[int], threshold: int) -> dict:
    """Forward jumps of the decision time per namespace, and leases they cut short."""
    top: dict[str, int] = {}
    live: dict[str, dict[tuple, int]] = {}  # ns -> tuple -> latest granted expiry (ms)
    jumps: list[dict] = []
    max_jump, expired_early, decisions = 0, 0, 0
    for _pos, is_comp, op in prep.events:
        if not is_comp:
            continue
        t = instant_ms(decision_time(op, fresh))
        if t is None:
            continue
        decisions += 1
        ns = op.req.get("ledger_namespace")
        m = top.get(ns)
        if m is not None and t > m:
            jump = t - m
            max_jump = max(max_jump, jump)
            if jump > threshold:
                cut = [k for k, x in live.get(ns, {}).items() if m < x <= t]
                expired_early += len(cut)
                if len(jumps) < 20:
                    jumps.append({"namespace": ns, "from_ms": m, "to_ms": t, "jump_ms": jump, "op": op.c,
                                  "leases_expired_early": len(cut)})
        if m is None or t > m:
            top[ns] = t
        if op.type == "ok" and op.f in ("acquire", "renew"):
            x = instant_ms(obj(op.result().get("claim")).get("expires_at"))
            if x is not None:
                live.setdefault(ns, {})[op.tuple()] = x
        elif op.type == "ok" and op.f == "release":
            live.get(ns, {}).pop(op.tuple(), None)
    return {"decisions": decisions, "max_jump_ms": max_jump, "jump_threshold_ms": threshold,
            "large_jumps": jumps, "leases_expired_early": expired_early}
