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
4. a reply that says ``state: "unchanged"`` changed nothing (``unchanged``:
   a refused acquire installed no generation, a refused release freed
   nothing, a refused publish stored no outcome; epochs are not consumed
   beyond what successful and uncertain acquires account for).
"""

from __future__ import annotations

from . import leases as _leases
from . import unchanged
from ._common import BAD, Findings, Op, at, fmt_tuple, prepare, realtime_regressions
from .floors import decision_time, fresh_publishes
from .idempotence import is_stored_kind

CLAIM_FS = frozenset(("acquire", "renew", "release", "read", "publish", "legacy-create", "legacy-transition"))


def check(history, ctx: dict | None = None) -> dict:
    prep = prepare(history)
    out = Findings()
    fresh = fresh_publishes(prep)

    def last_epoch(op: Op) -> int | None:
        if not op.definite or op.f not in CLAIM_FS or (op.f == "publish" and op.ip not in fresh):
            return None
        return op.le if op.le is not None and op.le >= 0 else None

    for b, seen, acked, a in realtime_regressions(prep, lambda op: op.key if op.f in CLAIM_FS else None,
                                                  last_epoch, last_epoch):
        out.add(
            "epoch-high-water-lost",
            f"Tuple {fmt_tuple(b.tuple())}: {b.f} (process {b.process}) read last_epoch {seen} after {a.f} "
            f"(process {a.process}) had already been answered with last_epoch {acked}. The epoch high-water "
            "mark is durable and never decreases, across restarts too (contract §1, §2, §5 Release).",
            [*a.indices, *b.indices], tuple=list(b.key or ()), acknowledged=str(acked), observed=str(seen),
        )

    def oid_key(op: Op):  # an outcome is stored per (operation_id, namespace, item) (vectors.md §8.6)
        if op.oid is None or op.f not in ("publish", "publication-read"):
            return None
        return (op.oid, op.key)

    def stored(op: Op):
        return 1 if op.f == "publish" and is_stored_kind(op) else None

    def found(op: Op):
        if op.f != "publication-read" or not op.definite:
            return None
        return 1 if op.type == "ok" else (0 if op.code == "operation-not-found" else None)

    for b, _seen, _one, a in realtime_regressions(prep, oid_key, stored, found):
        out.add(
            "publication-outcome-lost",
            f"Operation {b.oid}: its outcome was acknowledged (exit {a.exit}) and a "
            "publication read invoked afterwards answered operation-not-found. A stored terminal outcome is "
            "durable and readable by operation id (contract §6, §8).",
            [*a.indices, *b.indices], operation_id=b.oid,
        )

    lease_map = _leases.build(prep)
    unchanged.check_unchanged(out, prep, lease_map, ctx or {})
    final = _check_final(out, prep, fresh)
    return out.result({"final_state": final})


def _check_final(out: Findings, prep, fresh: set[int]) -> str:
    fin = prep.final
    if fin is None:
        return "absent"
    fi = fin.index
    # a black-box export observes only some arrays (item files: "ledgers");
    # what it does not observe is not compared (the final reads are in the history)
    observed = fin.observed
    claims = {key: le for key, (le, _active) in fin.claims.items()}
    floors = fin.floors
    ledgers = {key: rev for key, (rev, _digest) in fin.ledgers.items()}
    outcomes = {(o[0], o[1], o[2]) for o in fin.outcomes}

    max_epoch: dict[tuple, tuple[int, Op]] = {}
    max_time: dict[str, tuple[int, Op]] = {}
    last_pub: dict[tuple, tuple[int, list[Op]]] = {}  # the accepted publishes at the latest decision time
    maybe_later: dict[tuple, set] = {}
    legacy: set = set()
    for op in prep.ops:
        key = op.key
        if key is None:
            continue
        if op.f in ("legacy-create", "legacy-transition") and op.type != "fail":
            legacy.add(key)
        if op.f == "publish" and op.uncertain:
            maybe_later.setdefault(key, set()).add(op.cand)
        if not op.definite:
            continue
        if op.f == "acquire" and op.type == "ok" and op.claim not in (None, BAD):
            e = op.claim[1]
            if e is not None and e > max_epoch.get(key, (0, None))[0]:
                max_epoch[key] = (e, op)
        tm = decision_time(op, fresh)
        if tm is not None and tm > max_time.get(key[0], (-1,))[0]:
            max_time[key[0]] = (tm, op)
        if op.f == "publish" and is_stored_kind(op):
            if "publication_outcomes" in observed and (op.oid, key[0], key[1]) not in outcomes:
                out.add("final-outcome-missing",
                        f"Operation {op.oid}: its outcome was acknowledged (exit {op.exit}) but "
                        "the final durable state holds no outcome for it (contract §6, §8).",
                        [*op.indices, fi], operation_id=op.oid)
            if op.type == "ok":
                pt = op.t
                prev = last_pub.get(key)
                if pt is not None and (prev is None or pt > prev[0]):
                    last_pub[key] = (pt, [op])
                elif pt is not None and pt == prev[0]:
                    prev[1].append(op)

    for key, (e, op) in max_epoch.items():
        if "claims" in observed and (claims.get(key) or 0) < e:
            out.add("final-epoch-lost",
                    f"Tuple {fmt_tuple(key)}: acquire was acknowledged with epoch {e}, but the final durable "
                    f"last_epoch is {claims.get(key) or 0}. An acknowledged epoch survives every crash and "
                    "restart (contract §1, §5).", [*op.indices, fi], tuple=list(key), acknowledged=str(e))
    for ns, (tm, op) in max_time.items():
        fl, text = floors.get(ns, (None, None))
        if "clock_floors" in observed and (fl is None or fl < tm):
            out.add("final-floor-lost",
                    f"Namespace {ns}: decision time {at(tm)} was acknowledged, but the final durable floor is "
                    f"{text}. The floor is persisted before every decision and recovered on restart "
                    "(contract §4).", [*op.indices, fi], namespace=ns, acknowledged=at(tm), final=text)
    for key, (_pt, ops) in last_pub.items():
        rev = ledgers.get(key)
        op = ops[-1]
        cand = op.cand
        if "ledgers" in observed and rev not in {o.cand for o in ops} and key not in legacy \
                and rev not in maybe_later.get(key, ()):
            out.add("final-revision-lost",
                    f"Tuple {fmt_tuple(key)}: the last accepted publication ({op.oid}) "
                    f"committed {cand}, but the final durable revision is {rev}. An acknowledged publication "
                    "is durable unless a later accepted one supersedes it (contract §6, §8).",
                    [*op.indices, fi], tuple=list(key), committed=cand, final=rev)
    return "checked" if len(observed) == 4 else f"checked ({', '.join(sorted(observed))} observed)"
