"""Epochs: every successful acquire allocates exactly ``last_epoch + 1``, and
an epoch, once allocated, never comes back (no ABA, also across restarts).

Contract §2 ("Epochs never wrap, decrement, or get reused"), §5 Acquire
step 4 ("allocate exactly last_epoch + 1"), §5 Release ("A later acquire must
allocate a greater epoch, preventing ABA even across restart"). Checks:

1. an ok acquire's ``claim.epoch`` is its (matched) witness ``last_epoch + 1``
   and its ``read_back.last_epoch`` equals that epoch;
2. two ok acquires of one tuple never return the same epoch;
3. per tuple, an ok acquire invoked after another ok acquire completed (real
   time) got a greater epoch. Real time, not ``issued_at``: when decision times
   go backwards the epochs may be fine and the clock floor is what broke, and
   ``floors`` names that (``decision-time-regressed``);
4. every reply that shows epoch *e* of a tuple shows the same generation
   ``(owner_id, issued_at)`` (a different one is a reused epoch).
"""

from __future__ import annotations

from . import leases as _leases
from ._common import BAD, Findings, Op, at, fmt_tuple, prepare, realtime_regressions


def check(history, ctx: dict | None = None) -> dict:
    h = prepare(history)
    out = Findings()
    by_tuple: dict[tuple[str, str], list] = {}
    acquires = 0

    for op in h.ops:
        if op.f != "acquire" or op.type != "ok" or op.claim is None or op.claim is BAD:
            continue
        key, e = op.key, op.claim[1]
        if key is None or e is None:
            continue  # malformed: the envelopes checker says so
        acquires += 1
        if op.w_le is not None and e != op.w_le + 1:
            out.add(
                "epoch-not-next",
                f"Tuple {fmt_tuple(key)}: acquire by {op.owner!r} succeeded with witness "
                f"last_epoch {op.w_le} but was given epoch {e}, not {op.w_le + 1}. A successful acquire "
                "allocates exactly last_epoch + 1 (contract §5 Acquire, step 4).",
                op.indices, tuple=list(key), witness_last_epoch=str(op.w_le), epoch=str(e),
            )
        if op.le is not None and op.le >= 0 and op.le != e:
            out.add(
                "epoch-readback-mismatch",
                f"Tuple {fmt_tuple(key)}: acquire returned claim epoch {e} but read_back.last_epoch "
                f"{op.le}. The active epoch equals last_epoch (contract §4).",
                op.indices, tuple=list(key), epoch=str(e), last_epoch=str(op.le),
            )
        by_tuple.setdefault(key, []).append((e, op))

    for key, rows in by_tuple.items():
        seen: dict[int, Op] = {}
        for e, op in rows:
            prev = seen.get(e)
            if prev is not None:
                out.add(
                    "epoch-reallocated",
                    f"Tuple {fmt_tuple(key)}: two successful acquires were both given epoch {e} "
                    f"(owners {prev.owner!r} and {op.owner!r}). Epochs are never "
                    "reused; a reused epoch is an ABA fencing token (contract §2, §5 Release).",
                    [*prev.indices, *op.indices], tuple=list(key), epoch=str(e),
                )
            else:
                seen[e] = op

    def allocated(op: Op):
        if op.f == "acquire" and op.type == "ok" and op.claim is not None and op.claim is not BAD:
            return op.claim[1]
        return None

    for b, e2, e1, a in realtime_regressions(h, lambda op: op.key if op.f == "acquire" else None,
                                             allocated, allocated):
        out.add(
            "epoch-decreased",
            f"Tuple {fmt_tuple(b.key)}: acquire by {b.owner!r} was invoked after acquire by {a.owner!r} "
            f"had completed with epoch {e1}, yet it was given the smaller epoch {e2}. Epochs never "
            "decrement, also across restarts (contract §2, §5 Release).",
            [*a.indices, *b.indices], tuple=list(b.key), epochs=[str(e1), str(e2)],
        )

    lost_acquires: dict[tuple, set] = {}  # (tuple, owner, witness last_epoch) -> leases of unknown-outcome acquires
    for op in h.ops:
        if op.f == "acquire" and op.uncertain and op.lease is not None and op.w_le is not None:
            lost_acquires.setdefault((op.key, op.owner, op.w_le), set()).add(op.lease)
    for key, gens in _leases.build(h).items():
        for e, g in gens.items():
            for owner, issued, op in g.conflicts:
                out.add(
                    "epoch-reused",
                    f"Tuple {fmt_tuple(key)}: epoch {e} was first seen as owner {g.owner!r} issued at {g.issued}, "
                    f"later as owner {owner!r} issued at {issued}. An epoch identifies one allocation forever; "
                    "seeing it again for another generation is ABA (contract §2, §5 Release).",
                    [*g.first_op.indices, *op.indices], tuple=list(key), epoch=str(e),
                    generations=[[g.owner, g.issued], [owner, issued]],
                )

        for e, g in gens.items():
            if g.uncertain_renew or not g.unset_shown or g.issued_ms is None:
                continue  # a renew no reply shows may have set any expiry
            expiries = set(g.set_expiries)
            if not g.acquired:  # made by an acquire whose reply was lost: issued_at + its lease
                leases = lost_acquires.get((key, g.owner, e - 1), ())
                if len(leases) != 1:
                    continue
                expiries |= {g.issued_ms + lease for lease in leases}
            for x, op in g.unset_shown:
                if x in expiries or _leases.refused_renew_behind(h, key, e, g, op) is not None:
                    continue   # (a refused renew that set it: durability's unchanged-reply-took-effect)
                out.add(
                    "read-back-not-durable",
                    f"Tuple {fmt_tuple(key)}: {op.f} (op {op.i}) shows epoch {e} of {g.owner!r} expiring at {at(x)}, "
                    "but no acquire or renew of that generation set that expiry (they set "
                    + ", ".join(at(v) for v in sorted(expiries)) + "). A reply shows the exact durable "
                    "record (contract §4, §5: the normalized read-back).",
                    [*g.first_op.indices, *op.indices], tuple=list(key), epoch=str(e), shown=at(x),
                    set=[at(v) for v in sorted(expiries)],
                )
                break

    return out.result({"ok_acquires": acquires, "tuples": len(by_tuple)})
