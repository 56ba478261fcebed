"""Dual ownership: at most one owner holds a tuple at any backend instant.

Contract §4-§5: a lease is active exactly while ``effective_now <
expires_at``; acquire on an unexpired active claim must answer ``claim-held``;
each epoch names one owner generation. Three checks:

1. one owner per epoch per tuple (every reply showing epoch *e* names the same
   ``owner_id``);
2. the provable holding intervals ``[issued_at, end)`` of two different epochs
   of a tuple never overlap (``leases.Generation.held_interval``; uncertain
   renews/releases shrink an interval to its provable points, so an overlap is
   never an artefact of a lost reply);
3. a successful acquire whose own CAS witness shows an active claim that was
   unexpired at the acquire's decision time (the witness matched, so the claim
   was live: the answer had to be ``claim-held``).
"""

from __future__ import annotations

from . import leases as _leases
from ._common import Findings, fmt_tuple, instant_ms, obj, prepare, read_back_of


def check(history: list[dict], ctx: dict | None = None) -> dict:
    prep = prepare(history)
    lease_map = _leases.build(prep)
    out = Findings()
    intervals = 0

    for key, gens in lease_map.items():
        spans = []
        for e, g in gens.items():
            for owner, _issued, op in g.conflicts:
                if owner != g.owner:
                    out.add(
                        "two-owners-one-epoch",
                        f"Tuple {fmt_tuple(key)}: epoch {e} was reported for owner {g.owner!r} and for owner "
                        f"{owner!r}. An epoch is one owner generation; two owners under one fencing token "
                        "cannot be told apart by the ledger (contract §2, §4).",
                        [*g.first_op.indices, *op.indices],
                        tuple=list(key), epoch=str(e), owners=[g.owner, owner],
                    )
            iv = g.held_interval()
            if iv is not None:
                spans.append((iv[0], iv[1], e, g, iv[2]))
        intervals += len(spans)
        spans.sort(key=lambda s: (s[0], s[2]))
        best = None  # the span with the greatest end so far
        for span in spans:
            if best is not None and span[0] < best[1] and span[2] != best[2]:
                a, b = best, span
                out.add(
                    "overlapping-leases",
                    f"Tuple {fmt_tuple(key)}: epoch {b[2]} (owner {b[3].owner!r}) was issued at {b[3].issued} "
                    f"while epoch {a[2]} (owner {a[3].owner!r}, issued {a[3].issued}) was provably still held "
                    f"until at least {_fmt(a[1])}. Two owners held the item at once; acquire must refuse an "
                    "unexpired active claim with claim-held (contract §4, §5 Acquire).",
                    [*a[3].first_op.indices, *(a[4].indices if a[4] else []), *b[3].first_op.indices],
                    tuple=list(key), epochs=[str(a[2]), str(b[2])], owners=[a[3].owner, b[3].owner],
                    intervals=[[a[3].issued, _fmt(a[1])], [b[3].issued, _fmt(b[1])]],
                )
            if best is None or span[1] > best[1]:
                best = span

    for op in prep.ops:
        if op.f != "acquire" or op.type != "ok" or op.env is None:
            continue
        witness = obj(obj(op.req.get("expected")).get("active"))
        rb = read_back_of(op)
        t = instant_ms(rb.get("observed_at")) if rb else None
        x = instant_ms(witness.get("expires_at"))
        if witness and t is not None and x is not None and t < x:
            out.add(
                "acquire-over-live-claim",
                f"Tuple {fmt_tuple(op.tuple())}: acquire by {op.req.get('owner_id')!r} succeeded at "
                f"{rb.get('observed_at')} although its matching CAS witness shows epoch "
                f"{witness.get('epoch')} of {witness.get('owner_id')!r} unexpired until {witness.get('expires_at')}. "
                "An equal witness with an unexpired active claim must return claim-held (contract §5 Acquire, step 2).",
                op.indices,
                tuple=list(op.tuple() or ()), decided_at=rb.get("observed_at"), witness=witness,
            )

    return out.result({"tuples": len(lease_map), "lease_intervals": intervals})


def _fmt(ms: int) -> str:
    from backends.contract.values import format_instant

    try:
        return format_instant(ms)
    except (ValueError, TypeError):
        return str(ms)
