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

And the converse: a request refused before the floor step (namespace binding,
schema, idempotency, candidate digest or validation: ``PRE_FLOOR``) changes
nothing, the floor included (contract §6 precedence, steps 1-5 before step 6;
vectors.md §5.1 rule 8). When such a refusal was pinned at an instant
(``History.pins``) and a later reply in its namespace shows exactly that
instant, while no op that may persist a floor was pinned there, the refusal
persisted it: ``floor-moved-by-refusal``.
"""

from __future__ import annotations

from ._common import BAD, Findings, History, Op, at, fmt_tuple, prepare, realtime_regressions

DECISION_FS = frozenset(("acquire", "renew", "release", "legacy-create", "legacy-transition"))
#: refusals that stop before the floor step (vectors.md §5.1 rule 8)
PRE_FLOOR = frozenset(("invalid-request", "ledger-namespace-unbound", "idempotency-conflict",
                       "candidate-digest-mismatch", "ledger-invalid"))
DEFAULT_JUMP_MS = 10_000


def fresh_publishes(h: History) -> set[int]:
    """``ip`` of publishes whose reply cannot be a replay: the first attempt of
    its ``operation_id``, completed before any other attempt was invoked."""
    got = h.derived.get("fresh_publishes")
    if got is not None:
        return got
    first: dict[str, Op] = {}
    second_ip: dict[str, int] = {}
    for op in h.ops:
        if op.f != "publish" or op.oid is None:
            continue
        if op.oid not in first:
            first[op.oid] = op
        elif op.oid not in second_ip:
            second_ip[op.oid] = op.ip
    out = set()
    for oid, op in first.items():
        nxt = second_ip.get(oid)
        if op.cp is not None and (nxt is None or op.cp < nxt):
            out.add(op.ip)
    h.derived["fresh_publishes"] = out
    return out


def decision_time(op: Op, fresh: set[int]) -> int | None:
    """The persisted decision time (ms) of a definite reply, or ``None``."""
    if not op.definite:
        return None
    if op.f in DECISION_FS or (op.f == "publish" and op.ip in fresh):
        return op.t
    return None


def check(history, ctx: dict | None = None) -> dict:
    ctx = ctx or {}
    h = prepare(history)
    fresh = fresh_publishes(h)
    out = Findings()

    def key_of(op: Op):
        return op.key[0] if op.key and (op.f in DECISION_FS or op.f == "read" or op.f == "publish") else None

    def observe_of(op: Op):
        if not op.definite or (op.f == "publish" and op.ip not in fresh):
            return None
        return op.t

    for b, seen, floor, a in realtime_regressions(h, key_of, lambda op: decision_time(op, fresh), observe_of):
        out.add(
            "decision-time-regressed",
            f"Namespace {b.key[0]}: {b.f} by process {b.process} observed {at(seen)}, earlier "
            f"than {at(floor)}, the decision time persisted by {a.f} (process {a.process}) that completed before "
            "it was invoked. The durable clock floor never decreases, across restarts too "
            "(contract §4: effective_now = max(physical, floor)).",
            [*a.indices, *b.indices],
            namespace=b.key[0], floor=at(floor), observed=at(seen), ops_f=[a.f, b.f], tuple=list(b.key),
        )

    by_epoch: dict[tuple, list[tuple[int, int, Op]]] = {}
    for op in h.ops:
        if op.type != "ok" or op.f not in ("acquire", "renew") or op.claim is None or op.claim is BAD:
            continue
        t, claim = op.t, op.claim
        if t is None or op.lease is None:
            continue
        if op.f == "acquire":
            if claim[1] is not None and claim[2] is not None and op.key is not None:
                by_epoch.setdefault(op.key, []).append((claim[1], claim[2], op))
            if claim[2] != t:
                out.add(
                    "issued-at-not-decision-time",
                    f"Tuple {fmt_tuple(op.key)}: acquire decided at {at(t)} but issued the claim at "
                    f"{at(claim[2])}. Acquire sets issued_at to the persisted decision time "
                    "(contract §4; vectors.md §5.1 rule 6).",
                    op.indices, tuple=list(op.key or ()), observed_at=at(t), issued_at=at(claim[2]),
                )
        if claim[3] != t + op.lease:
            out.add(
                "expiry-not-from-decision-time",
                f"Tuple {fmt_tuple(op.key)}: {op.f} decided at {at(t)} with lease_duration_ms {op.lease} set "
                f"expires_at {at(claim[3])}. The new expiry is the persisted decision time plus "
                "the lease duration; client clocks never authorize a lease (contract §4).",
                op.indices, tuple=list(op.key or ()), observed_at=at(t), expires_at=at(claim[3]),
                lease_duration_ms=op.lease,
            )

    # Epochs serialize a tuple's acquires: a greater epoch was decided later, so it
    # cannot have been issued at an earlier time unless the decision time went back.
    for key, rows in by_epoch.items():
        rows.sort(key=lambda r: r[0])
        latest = None  # the (issued, op) with the greatest issue time among lower epochs
        for e, issued, op in rows:
            if latest is not None and issued < latest[0] and latest[1].claim[1] < e:
                a = latest[1]
                out.add(
                    "decision-time-regressed",
                    f"Tuple {fmt_tuple(key)}: epoch {e} was issued at {at(issued)}, before epoch {a.claim[1]} "
                    f"was issued at {at(latest[0])}, although a greater epoch is allocated by a later decision. "
                    "Decision time went back between the two acquires: the durable clock floor never "
                    "decreases (contract §4: effective_now = max(physical, floor)).",
                    [*a.indices, *op.indices], namespace=key[0], tuple=list(key),
                    epochs=[str(a.claim[1]), str(e)], issued=[at(latest[0]), at(issued)],
                )
            if latest is None or issued > latest[0]:
                latest = (issued, op)

    _refusals_that_moved_the_floor(h, out)
    stats = _jump_stats(h, fresh, int(ctx.get("floor_jump_threshold_ms", DEFAULT_JUMP_MS)))
    return out.result(stats)


def _refusals_that_moved_the_floor(h: History, out: Findings) -> None:
    refused: dict[str, dict[int, list[Op]]] = {}   # namespace -> pinned instant -> pre-floor refusals there
    may_persist: dict[str, set[int]] = {}          # namespace -> instants other pinned ops were decided at
    for op in h.ops:
        pin = h.pins.get(op.ip)
        if pin is None or not op.key:
            continue
        if op.definite and op.code in PRE_FLOOR:
            refused.setdefault(op.key[0], {}).setdefault(pin, []).append(op)
        else:
            may_persist.setdefault(op.key[0], set()).add(pin)
    if not refused:
        return
    reported: set[int] = set()
    for op in h.ops:
        t = op.t
        if t is None or not op.definite or not op.key or h.pins.get(op.ip) == t:
            continue
        ns = op.key[0]
        if t not in refused.get(ns, {}) or t in may_persist.get(ns, ()):
            continue
        for x in refused[ns][t]:
            if x.ip in reported or not x.precedes(op):
                continue
            reported.add(x.ip)
            out.add(
                "floor-moved-by-refusal",
                f"Namespace {ns}: {x.f} by process {x.process}, decided at the pinned instant {at(t)}, was "
                f"refused with {x.code}, which stops before the floor step; yet {op.f} by process "
                f"{op.process}, invoked after it, shows exactly {at(t)}, and no other op was decided at that "
                "instant: the refusal persisted the clock floor. A namespace-binding, schema, idempotency, "
                "digest or candidate-validation failure changes nothing, the floor included (contract §6 "
                "precedence, steps 1-5 before step 6; vectors.md §5.1 rule 8).",
                [*x.indices, *op.indices], namespace=ns, code=x.code, pinned=at(t), ops_f=[x.f, op.f],
            )


def _jump_stats(h: History, fresh: set[int], threshold: int) -> dict:
    """Forward jumps of the decision time per namespace, and leases they cut short."""
    top: dict[str, int] = {}
    live: dict[str, dict[tuple, int]] = {}  # ns -> tuple -> latest granted expiry (ms)
    jumps: list[dict] = []
    max_jump, expired_early, decisions = 0, 0, 0
    for op in h.completed():
        t = decision_time(op, fresh)
        if t is None or op.key is None:
            continue
        decisions += 1
        ns = op.key[0]
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
        if op.type == "ok" and op.f in ("acquire", "renew") and op.claim not in (None, BAD):
            if op.claim[3] is not None:
                live.setdefault(ns, {})[op.key] = op.claim[3]
        elif op.type == "ok" and op.f == "release":
            live.get(ns, {}).pop(op.key, None)
    return {"decisions": decisions, "max_jump_ms": max_jump, "jump_threshold_ms": threshold,
            "large_jumps": jumps, "leases_expired_early": expired_early}
