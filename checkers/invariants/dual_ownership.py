"""Dual ownership: at most one owner holds a tuple at any backend instant.

Contract §4-§5: a lease is active exactly while ``effective_now <
expires_at``; acquire answers ``claim-conflict`` to an unequal witness and
``claim-held`` to an equal witness with an unexpired active claim; each epoch
names one owner generation. Checks:

1. one owner per epoch per tuple (every reply showing epoch *e* names the same
   ``owner_id``): ``two-owners-one-epoch``;
2. the provable holding intervals ``[issued_at, end)`` of two different epochs
   of a tuple never overlap (``leases.Generation.held_interval``; uncertain
   renews/releases shrink an interval to its provable points, so an overlap is
   never an artefact of a lost reply): ``overlapping-leases``;
3. a successful acquire whose own CAS witness shows a claim still unexpired at
   the acquire's decision time broke a rule either way; which one depends on
   the record at that instant: if the witness's claim had provably ended or
   changed before (released, renewed to another expiry, superseded by a newer
   epoch), the witness was unequal and the answer had to be ``claim-conflict``
   (``witness-mismatch-accepted``, §5 step 1); otherwise the claim was live
   and the answer had to be ``claim-held`` (``early-takeover``, §5 step 2);
4. a successful acquire whose witness ``last_epoch`` is below a
   ``last_epoch`` a reply had already shown for the tuple (a definite reply
   that completed before the acquire was invoked; ``last_epoch`` never goes
   back) was answered over an unequal witness: ``witness-mismatch-accepted``
   too (the stale witness of a free or expired item, which check 3 does not
   see; its epoch is then not the witness's ``last_epoch + 1`` either, which
   ``epochs`` reports as ``epoch-not-next``);
5. two successful acquires of a tuple with one and the same witness: each
   raised ``last_epoch`` past it, so whichever was decided second met an
   unequal witness, however the two overlapped (a check-then-act acquire):
   ``witness-mismatch-accepted`` on the later-decided one.
"""

from __future__ import annotations

import bisect

from . import leases as _leases
from ._common import BAD, Findings, Op, active_text, at, fmt_tuple, once, prepare


def check(history, ctx: dict | None = None) -> dict:
    """(computed once per history and context: ``capability_honesty`` builds on it)"""
    return once(prepare(history), "dual_ownership", _check, ctx if ctx is not None else {})


def _check(history, ctx: dict) -> dict:
    h = prepare(history)
    lease_map = _leases.build(h)
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
                    f"until at least {at(a[1])}. Two owners held the item at once: a lease is active while "
                    "effective_now < expires_at, and acquire refuses an unexpired active claim "
                    "(contract §4, §5 Acquire steps 1-2).",
                    [*a[3].first_op.indices, *(a[4].indices if a[4] else []), *b[3].first_op.indices],
                    tuple=list(key), epochs=[str(a[2]), str(b[2])], owners=[a[3].owner, b[3].owner],
                    intervals=[[a[3].issued, at(a[1])], [b[3].issued, at(b[1])]],
                )
            if best is None or span[1] > best[1]:
                best = span

    flagged = set()
    for op in h.ops:
        if op.f != "acquire" or op.type != "ok" or op.le is None:
            continue
        w, t = op.w_active, op.t
        if w is None or w is BAD or w[3] is None or t is None or t >= w[3]:
            continue
        proof = _witness_superseded(op, w, lease_map.get(op.key, {}))
        common = dict(tuple=list(op.key or ()), decided_at=at(t), witness=active_text(w))
        if proof is not None:
            why, proof_op = proof
            flagged.add(op.i)
            out.add(
                "witness-mismatch-accepted",
                f"Tuple {fmt_tuple(op.key)}: acquire by {op.owner!r} succeeded at {at(t)} with a CAS witness "
                f"naming {active_text(w)}, but {why} (op {proof_op.i}), so the durable record no longer equalled "
                "the witness. An unequal witness must return claim-conflict (contract §5 Acquire, step 1).",
                [*op.indices, *proof_op.indices], **common)
        else:
            out.add(
                "early-takeover",
                f"Tuple {fmt_tuple(op.key)}: acquire by {op.owner!r} succeeded at {at(t)} although its matching "
                f"CAS witness shows {active_text(w)}, unexpired until {at(w[3])}. An equal witness with an "
                "unexpired active claim must return claim-held; takeover is only for an expired record "
                "(contract §4, §5 Acquire, step 2).",
                op.indices, **common)

    _stale_last_epoch(h, out, flagged)
    _one_witness_twice(h, out, flagged)
    return out.result({"tuples": len(lease_map), "lease_intervals": intervals})


def _stale_last_epoch(h, out: Findings, flagged: set) -> None:
    """Check 4: per tuple, the greatest ``last_epoch`` shown by a definite reply
    completed before each ok acquire was invoked, against its witness."""
    shown: dict = {}   # key -> [(completion position, last_epoch, op)] in completion order
    for op in h.ops:
        if op.definite and op.key is not None and op.le is not None and op.le >= 0 and op.cp is not None:
            shown.setdefault(op.key, []).append((op.cp, op.le, op))
    for rows in shown.values():
        rows.sort(key=lambda r: r[0])
    best: dict = {}    # key -> (positions, running max last_epoch, the op that showed it)
    for key, rows in shown.items():
        top, pos, maxes, ops = -1, [], [], []
        for cp, le, op in rows:
            if le > top:
                top, who = le, op
            pos.append(cp)
            maxes.append(top)
            ops.append(who)
        best[key] = (pos, maxes, ops)
    for op in h.ops:
        if op.f != "acquire" or op.type != "ok" or op.w_le is None or op.i in flagged or op.key not in best:
            continue
        pos, maxes, ops = best[op.key]
        n = bisect.bisect_left(pos, op.ip)   # replies completed before op was invoked
        if n == 0 or maxes[n - 1] <= op.w_le:
            continue
        proof_op = ops[n - 1]
        out.add(
            "witness-mismatch-accepted",
            f"Tuple {fmt_tuple(op.key)}: acquire by {op.owner!r} succeeded with a CAS witness of last_epoch "
            f"{op.w_le}, but op {proof_op.i} had already shown last_epoch {maxes[n - 1]} (last_epoch never goes "
            "back), so the durable record no longer equalled the witness. An unequal witness must return "
            "claim-conflict (contract §5 Acquire, step 1).",
            [*op.indices, *proof_op.indices], tuple=list(op.key), witness_last_epoch=str(op.w_le),
            shown_last_epoch=str(maxes[n - 1]))


def _one_witness_twice(h, out: Findings, flagged: set) -> None:
    """Check 5: ok acquires of one tuple grouped by their exact witness."""
    by_witness: dict = {}
    for op in h.ops:
        if (op.f != "acquire" or op.type != "ok" or not op.definite or op.key is None or op.w_le is None
                or op.w_active is BAD or op.t is None):
            continue
        by_witness.setdefault((op.key, op.w_le, op.w_active), []).append(op)
    for (key, w_le, w_active), ops in by_witness.items():
        ops.sort(key=lambda op: (op.t, op.i))
        first = ops[0]
        for op in ops[1:]:
            if op.i in flagged:
                continue
            flagged.add(op.i)
            out.add(
                "witness-mismatch-accepted",
                f"Tuple {fmt_tuple(key)}: acquire by {op.owner!r} succeeded at {at(op.t)} with the CAS witness "
                f"(last_epoch {w_le}, {active_text(w_active)}) that acquire {first.i} by {first.owner!r} had "
                f"already succeeded with at {at(first.t)}; each success raises last_epoch past the witness, so "
                "the second met an unequal record. An unequal witness must return claim-conflict, compared and "
                "written in one serialized decision (contract §5 Acquire, step 1).",
                [*first.indices, *op.indices], tuple=list(key), decided_at=at(op.t),
                witness_last_epoch=str(w_le))


def _witness_superseded(op: Op, w: tuple, gens: dict) -> tuple[str, Op] | None:
    """Evidence that the witness's claim had ended or changed before ``op``
    decided: its release, a renew to another expiry, or a newer epoch, each
    decided before ``op`` (earlier decision time, or completed before ``op``
    was invoked)."""
    g = gens.get(w[1])
    t = op.t

    def before(other: Op | None, other_t: int | None) -> bool:
        return other is not None and other is not op and (
            other.precedes(op) or (other_t is not None and other_t < t))

    if g is not None and g.owner == w[0] and before(g.release_op, g.release_ms):
        return f"epoch {w[1]} had been released at {at(g.release_ms)}", g.release_op
    if g is not None and g.owner == w[0] and not g.uncertain_end and g.exp_ms is not None and g.exp_ms != w[3] \
            and g.exp_at_ms is not None and before(g.exp_op, g.exp_at_ms) and g.exp_op.f == "renew":
        return f"epoch {w[1]} had been renewed to expire at {at(g.exp_ms)}", g.exp_op
    for e, newer in gens.items():
        if e > w[1] and e != (op.claim[1] if op.claim and op.claim is not BAD else None) \
                and before(newer.first_op, newer.issued_ms):
            return f"epoch {e} had been issued at {newer.issued}", newer.first_op
    return None
