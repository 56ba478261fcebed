"""Durability: nothing acknowledged is lost, across crashes and restarts; and a
reply that says ``unchanged`` really changed nothing.

Contract §1 (claims, epoch high-water marks, floors and publication outcomes
live in the durable coordinator), §4 (restart recovers the floor), §5 Release
("retains last_epoch ... even across restart"), §6 (an outcome is readable
by operation id), §8 (``state: "unchanged"``). Checks:

1. per tuple, ``last_epoch`` seen by a reply never falls below a value that a
   reply completed before it was invoked had already shown (an acknowledged
   epoch, or a high-water mark, was lost);
2. a publication read invoked after a stored outcome was acknowledged never
   answers ``operation-not-found``;
3. against the runner's ``final-state`` entry when present: the final
   ``last_epoch`` covers every acknowledged epoch; the final floor covers every
   acknowledged decision time; the final revision is the last accepted
   candidate (unless an uncertain publish or legacy write may have followed);
   every acknowledged stored outcome is present;
4. a failed acquire (``state: "unchanged"``) did not install its owner (no
   generation shows that owner issued at that decision time), and epochs were
   not consumed beyond what successful and uncertain acquires account for.
"""

from __future__ import annotations

from . import leases as _leases
from ._common import (Findings, Op, epoch_int, fmt_tuple, instant_ms, obj, observed_at, prepare,
                      read_back_of, realtime_regressions)
from .floors import decision_time, fresh_publishes
from .idempotence import is_stored_kind

CLAIM_FS = frozenset(("acquire", "renew", "release", "read", "publish", "legacy-create", "legacy-transition"))


def check(history: list[dict], ctx: dict | None = None) -> dict:
    prep = prepare(history)
    out = Findings()
    fresh = fresh_publishes(prep.ops)

    def last_epoch(op: Op) -> int | None:
        if not op.definite or op.f not in CLAIM_FS or (op.f == "publish" and op.ip not in fresh):
            return None
        rb = read_back_of(op)
        return epoch_int(rb.get("last_epoch")) if rb else None

    for b, seen, acked, a in realtime_regressions(prep, lambda op: op.tuple() if op.f in CLAIM_FS else None,
                                                  last_epoch, last_epoch):
        out.add(
            "epoch-high-water-lost",
            f"Tuple {fmt_tuple(b.tuple())}: {b.f} (process {b.process}) read last_epoch {seen} after {a.f} "
            f"(process {a.process}) had already been answered with last_epoch {acked}. The epoch high-water "
            "mark is durable and never decreases, across restarts too (contract §1, §2, §5 Release).",
            [*a.indices, *b.indices], tuple=list(b.tuple() or ()), acknowledged=str(acked), observed=str(seen),
        )

    def oid_key(op: Op):  # an outcome is stored per (operation_id, namespace, item) (vectors.md §8.6)
        if op.f not in ("publish", "publication-read"):
            return None
        return (op.req.get("operation_id"), op.req.get("ledger_namespace"), op.req.get("item_id"))

    def stored(op: Op):
        return 1 if op.f == "publish" and is_stored_kind(op) else None

    def found(op: Op):
        if op.f != "publication-read" or not op.definite:
            return None
        return 1 if op.type == "ok" else (0 if op.code() == "operation-not-found" else None)

    for b, _seen, _one, a in realtime_regressions(prep, oid_key, stored, found):
        out.add(
            "publication-outcome-lost",
            f"Operation {b.req.get('operation_id')}: its outcome was acknowledged (exit {a.exit}) and a "
            "publication read invoked afterwards answered operation-not-found. A stored terminal outcome is "
            "durable and readable by operation id (contract §6, §8).",
            [*a.indices, *b.indices], operation_id=b.req.get("operation_id"),
        )

    lease_map = _leases.build(prep)
    _check_unchanged(out, prep, lease_map)
    final = _check_final(out, prep, fresh)
    return out.result({"final_state": final})


def _check_unchanged(out: Findings, prep, lease_map) -> None:
    explained: set[tuple] = set()  # (tuple, owner, issued_at) of ok acquires
    uncertain_owner: set[tuple] = set()
    uncertain_count: dict[tuple, int] = {}
    failed: list[tuple[Op, str]] = []
    low: dict[tuple, int] = {}
    high: dict[tuple, tuple[int, Op]] = {}
    for op in prep.ops:
        key = op.tuple()
        if key is None or op.f not in CLAIM_FS:
            continue
        if op.f == "acquire":
            owner = op.req.get("owner_id")
            if op.uncertain:
                uncertain_owner.add((key, owner))
                uncertain_count[key] = uncertain_count.get(key, 0) + 1
            elif op.type == "ok":
                explained.add((key, owner, obj(op.result().get("claim")).get("issued_at")))
                w = epoch_int(obj(op.req.get("expected")).get("last_epoch"))
                if w is not None:
                    low[key] = min(low.get(key, w), w)
            elif op.type == "fail" and observed_at(op):
                failed.append((op, observed_at(op)))
        rb = read_back_of(op) if op.definite else None
        le = epoch_int(rb.get("last_epoch")) if rb else None
        if le is not None:
            low[key] = min(low.get(key, le), le)
            if key not in high or le > high[key][0]:
                high[key] = (le, op)

    for op, t in failed:
        key, owner = op.tuple(), op.req.get("owner_id")
        if (key, owner, t) in explained or (key, owner) in uncertain_owner:
            continue
        for e, g in lease_map.get(key, {}).items():
            if g.owner == owner and g.issued == t:
                out.add(
                    "failed-acquire-took-effect",
                    f"Tuple {fmt_tuple(key)}: acquire by {owner!r} was refused at {t} with "
                    f"{op.code()} (state unchanged), yet epoch {e} shows that owner issued at that very "
                    "decision time. A rejection commits only the floor; claim and epoch stay unchanged "
                    "(contract §4, §8).",
                    [*op.indices, *g.first_op.indices], tuple=list(key), epoch=str(e), owner=owner,
                )

    for key, (hi, hi_op) in high.items():
        lo = low.get(key, hi)
        seen = sum(1 for e, g in lease_map.get(key, {}).items() if lo < e <= hi and g.owner)
        missing = (hi - lo) - seen
        if missing > uncertain_count.get(key, 0):
            out.add(
                "epoch-consumed-silently",
                f"Tuple {fmt_tuple(key)}: last_epoch rose from {lo} to {hi}, but only {seen} of those epochs were "
                f"ever shown as a claim and only {uncertain_count.get(key, 0)} acquire(s) had an unknown outcome. "
                f"{missing - uncertain_count.get(key, 0)} epoch(s) were allocated by operations that reported "
                "no change. Only a successful acquire allocates an epoch (contract §5 Acquire, §8).",
                hi_op.indices, tuple=list(key), low=str(lo), high=str(hi), shown=seen,
                uncertain_acquires=uncertain_count.get(key, 0),
            )


def _check_final(out: Findings, prep, fresh: set[int]) -> str:
    fin = prep.final_durable
    if not isinstance(fin, dict):
        return "absent"
    fi = prep.final_index
    claims = {(c.get("ledger_namespace"), c.get("item_id")): epoch_int(c.get("last_epoch"))
              for c in map(obj, fin.get("claims") or [])}
    floors = {f.get("ledger_namespace"): f.get("observed_at") for f in map(obj, fin.get("clock_floors") or [])}
    ledgers = {(x.get("ledger_namespace"), x.get("item_id")): x.get("revision") for x in map(obj, fin.get("ledgers") or [])}
    outcomes = {(x.get("operation_id"), x.get("ledger_namespace"), x.get("item_id"))
                for x in map(obj, fin.get("publication_outcomes") or [])}

    max_epoch: dict[tuple, tuple[int, Op]] = {}
    max_time: dict[str, tuple[int, str, Op]] = {}
    last_pub: dict[tuple, tuple[int, list[Op]]] = {}  # the accepted publishes at the latest decision time
    maybe_later: dict[tuple, set] = {}
    legacy: set = set()
    for op in prep.ops:
        key = op.tuple()
        if key is None:
            continue
        if op.f in ("legacy-create", "legacy-transition") and op.type != "fail":
            legacy.add(key)
        if op.f == "publish" and op.uncertain:
            maybe_later.setdefault(key, set()).add(op.req.get("candidate_sha256"))
        if not op.definite:
            continue
        if op.f == "acquire" and op.type == "ok":
            e = epoch_int(obj(op.result().get("claim")).get("epoch"))
            if e is not None and e > max_epoch.get(key, (0, None))[0]:
                max_epoch[key] = (e, op)
        t = decision_time(op, fresh)
        tm = instant_ms(t)
        if tm is not None and tm > max_time.get(key[0], (-1,))[0]:
            max_time[key[0]] = (tm, t, op)
        if op.f == "publish" and is_stored_kind(op):
            if (op.req.get("operation_id"), key[0], key[1]) not in outcomes:
                out.add("final-outcome-missing",
                        f"Operation {op.req.get('operation_id')}: its outcome was acknowledged (exit {op.exit}) but "
                        "the final durable state holds no outcome for it (contract §6, §8).",
                        [*op.indices, fi], operation_id=op.req.get("operation_id"))
            if op.type == "ok":
                pt = instant_ms(obj(op.result().get("claim_read_back")).get("observed_at"))
                prev = last_pub.get(key)
                if pt is not None and (prev is None or pt > prev[0]):
                    last_pub[key] = (pt, [op])
                elif pt is not None and pt == prev[0]:
                    prev[1].append(op)

    for key, (e, op) in max_epoch.items():
        if (claims.get(key) or 0) < e:
            out.add("final-epoch-lost",
                    f"Tuple {fmt_tuple(key)}: acquire was acknowledged with epoch {e}, but the final durable "
                    f"last_epoch is {claims.get(key) or 0}. An acknowledged epoch survives every crash and "
                    "restart (contract §1, §5).", [*op.indices, fi], tuple=list(key), acknowledged=str(e))
    for ns, (tm, t, op) in max_time.items():
        fl = instant_ms(floors.get(ns))
        if fl is None or fl < tm:
            out.add("final-floor-lost",
                    f"Namespace {ns}: decision time {t} was acknowledged, but the final durable floor is "
                    f"{floors.get(ns)}. The floor is persisted before every decision and recovered on restart "
                    "(contract §4).", [*op.indices, fi], namespace=ns, acknowledged=t, final=floors.get(ns))
    for key, (_pt, ops) in last_pub.items():
        rev = ledgers.get(key)
        op = ops[-1]
        cand = op.req.get("candidate_sha256")
        if rev not in {o.req.get("candidate_sha256") for o in ops} and key not in legacy and rev not in maybe_later.get(key, ()):
            out.add("final-revision-lost",
                    f"Tuple {fmt_tuple(key)}: the last accepted publication ({op.req.get('operation_id')}) "
                    f"committed {cand}, but the final durable revision is {rev}. An acknowledged publication "
                    "is durable unless a later accepted one supersedes it (contract §6, §8).",
                    [*op.indices, fi], tuple=list(key), committed=cand, final=rev)
    return "checked"
