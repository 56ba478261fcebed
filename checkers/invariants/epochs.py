"""Epochs: every successful acquire allocates exactly ``last_epoch + 1``, and
an epoch, once allocated, never comes back (no ABA, also across restarts).

Contract §2 ("Epochs never wrap, decrement, or get reused"), §5 Acquire
step 4 ("allocate exactly last_epoch + 1"), §5 Release ("A later acquire must
allocate a greater epoch, preventing ABA even across restart"). Checks:

1. an ok acquire's ``claim.epoch`` is its (matched) witness ``last_epoch + 1``
   and its ``read_back.last_epoch`` equals that epoch;
2. two ok acquires of one tuple never return the same epoch;
3. per tuple, ok acquires ordered by decision time (``issued_at``) allocate
   strictly increasing epochs;
4. every reply that shows epoch *e* of a tuple shows the same generation
   ``(owner_id, issued_at)`` (a different one is a reused epoch).
"""

from __future__ import annotations

from . import leases as _leases
from ._common import Findings, epoch_int, fmt_tuple, obj, prepare, read_back_of


def check(history: list[dict], ctx: dict | None = None) -> dict:
    prep = prepare(history)
    out = Findings()
    by_tuple: dict[tuple[str, str], list] = {}
    acquires = 0

    for op in prep.ops:
        if op.f != "acquire" or op.type != "ok" or op.env is None:
            continue
        key = op.tuple()
        claim = obj(op.result().get("claim"))
        e = epoch_int(claim.get("epoch"))
        if key is None or e is None:
            continue  # malformed: the envelopes checker says so
        acquires += 1
        witness = epoch_int(obj(op.req.get("expected")).get("last_epoch"))
        if witness is not None and e != witness + 1:
            out.add(
                "epoch-not-next",
                f"Tuple {fmt_tuple(key)}: acquire by {op.req.get('owner_id')!r} succeeded with witness "
                f"last_epoch {witness} but was given epoch {e}, not {witness + 1}. A successful acquire "
                "allocates exactly last_epoch + 1 (contract §5 Acquire, step 4).",
                op.indices, tuple=list(key), witness_last_epoch=str(witness), epoch=str(e),
            )
        rb = read_back_of(op) or {}
        if epoch_int(rb.get("last_epoch")) not in (None, e):
            out.add(
                "epoch-readback-mismatch",
                f"Tuple {fmt_tuple(key)}: acquire returned claim epoch {e} but read_back.last_epoch "
                f"{rb.get('last_epoch')}. The active epoch equals last_epoch (contract §4).",
                op.indices, tuple=list(key), epoch=str(e), last_epoch=rb.get("last_epoch"),
            )
        by_tuple.setdefault(key, []).append((claim.get("issued_at") or "", e, op))

    for key, rows in by_tuple.items():
        seen: dict[int, object] = {}
        for issued, e, op in rows:
            prev = seen.get(e)
            if prev is not None:
                out.add(
                    "epoch-reallocated",
                    f"Tuple {fmt_tuple(key)}: two successful acquires were both given epoch {e} "
                    f"(owners {prev.req.get('owner_id')!r} and {op.req.get('owner_id')!r}). Epochs are never "
                    "reused; a reused epoch is an ABA fencing token (contract §2, §5 Release).",
                    [*prev.indices, *op.indices], tuple=list(key), epoch=str(e),
                )
            else:
                seen[e] = op
        rows.sort(key=lambda r: (r[0], r[1]))
        for (i1, e1, op1), (i2, e2, op2) in zip(rows, rows[1:]):
            if i1 < i2 and e2 <= e1:
                out.add(
                    "epoch-decreased",
                    f"Tuple {fmt_tuple(key)}: acquire decided at {i2} got epoch {e2}, not more than epoch {e1} "
                    f"allocated earlier at {i1}. Epochs never decrement or repeat, also across restarts "
                    "(contract §2).",
                    [*op1.indices, *op2.indices], tuple=list(key), epochs=[str(e1), str(e2)], times=[i1, i2],
                )

    for key, gens in _leases.build(prep).items():
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

    return out.result({"ok_acquires": acquires, "tuples": len(by_tuple)})
