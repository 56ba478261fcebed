"""An ``unchanged`` reply changed nothing (contract §4, §5, §6, §8), part of
``durability``.

``state: "unchanged"`` is a definite answer, exit 6 included
(``clock-floor-persistence-failed`` "makes no claim or ledger change";
``claim-store-unavailable``: "nothing changed"), so the history holds the
backend to it. The effect of each refused op is recognisable later:

* ``failed-acquire-took-effect``: a generation (owner, epoch) that no
  successful acquire returned, whose owner has no acquire of unknown outcome
  on that tuple, but a refused acquire by that owner with witness
  ``last_epoch = epoch - 1`` (the one acquire that could have made it);
* ``unchanged-reply-took-effect`` (renew): a generation's expiry that no
  successful acquire or renew set, shown after a renew of it by its owner was
  refused (``epochs`` then leaves it to this, not ``read-back-not-durable``);
* ``unchanged-reply-took-effect`` (release): a record ``(epoch, active: null)``
  although every release of that epoch was refused (only a release frees an
  epoch's claim; expiry leaves the record in place until a takeover);
* ``unchanged-reply-took-effect`` (publish): a stored outcome for an
  operation whose every attempt with that request was refused with a code
  that stores nothing;
* ``epoch-consumed-silently``: ``last_epoch`` rose by more than the acquires
  that succeeded or may have succeeded account for.
"""

from __future__ import annotations

from ._common import BAD, Findings, History, at, fmt_tuple
from .leases import likeliest_refusal, refused_renew_behind
from .stale_write import revealed_outcomes

#: publication refusals that may be stored terminal outcomes (everything else stores nothing)
_MAY_STORE = frozenset(("claim-fence-rejected", "ledger-revision-conflict"))


def check_unchanged(out: Findings, h: History, lease_map: dict, ctx: dict) -> None:
    _acquires(out, h, lease_map)
    _renews(out, h, lease_map)
    _releases(out, h, ctx)
    _publishes(out, h)


def _acquires(out: Findings, h: History, lease_map: dict) -> None:
    made: set[tuple] = set()  # (tuple, owner, epoch, issued) returned by a successful acquire
    uncertain_owner: set[tuple] = set()
    uncertain_count: dict[tuple, int] = {}
    refused: dict[tuple, list] = {}  # (tuple, owner, witness last_epoch) -> refused acquires
    low: dict[tuple, int] = {}
    high: dict[tuple, tuple] = {}
    for op in h.ops:
        key = op.key
        if key is None:
            continue
        if op.f == "acquire":
            if op.uncertain:
                uncertain_owner.add((key, op.owner))
                uncertain_count[key] = uncertain_count.get(key, 0) + 1
            elif op.type == "ok":
                if op.claim not in (None, BAD):
                    made.add((key, op.owner, op.claim[1], op.claim[2]))
                if op.w_le is not None:
                    low[key] = min(low.get(key, op.w_le), op.w_le)
            elif op.type == "fail" and op.w_le is not None:
                refused.setdefault((key, op.owner, op.w_le), []).append(op)
        le = op.le if op.definite and op.le is not None and op.le >= 0 else None
        if le is not None and op.f in ("acquire", "renew", "release", "read", "publish", "legacy-create",
                                       "legacy-transition"):
            low[key] = min(low.get(key, le), le)
            if key not in high or le > high[key][0]:
                high[key] = (le, op)

    for key, gens in lease_map.items():
        for e, g in gens.items():
            if not g.owner or (key, g.owner, e, g.issued_ms) in made or (key, g.owner) in uncertain_owner:
                continue
            candidates = refused.get((key, g.owner, e - 1))
            for op in [_maker(candidates, g.first_op)] if candidates else []:
                out.add(
                    "failed-acquire-took-effect",
                    f"Tuple {fmt_tuple(key)}: acquire by {g.owner!r} with witness last_epoch {e - 1} was refused "
                    f"with {op.code} (state unchanged){'' if op.t is None else ' at ' + at(op.t)}, yet epoch {e} "
                    f"shows that owner issued at {g.issued}, and no successful or uncertain acquire of that "
                    "owner accounts for it. A refusal commits at most the floor; claim and epoch stay "
                    "unchanged (contract §4, §8).",
                    [*op.indices, *g.first_op.indices], tuple=list(key), epoch=str(e), owner=g.owner,
                    code=op.code,
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


def _maker(candidates: list, first) -> object:
    """Of the refused acquires that could have made a generation (its owner, witness ``epoch - 1``), the
    likeliest (``leases.likeliest_refusal``) of those invoked before the generation was first shown. The
    first of them may precede the generation by many refusals (a default Wowbagger run laid its F5, a
    journal fsync EIO, to a ``claim-held`` a second earlier, so the profile's F5 entry, which names the
    exit-6 code, did not match it)."""
    return likeliest_refusal([op for op in candidates if op.indices[0] < first.indices[-1]] or candidates)


def _renews(out: Findings, h: History, lease_map: dict) -> None:
    for key, gens in lease_map.items():
        for e, g in gens.items():
            for x, shown in g.unset_shown:
                op = None if x in g.set_expiries else refused_renew_behind(h, key, e, g, shown)
                if op is None:
                    continue
                out.add(
                    "unchanged-reply-took-effect",
                    f"Tuple {fmt_tuple(key)}: renew of epoch {e} by {g.owner!r} was refused with {op.code} "
                    f"(state unchanged), yet {shown.f} (op {shown.i}) shows that generation expiring at {at(x)}, "
                    "an expiry no successful acquire or renew of it set. A refusal changes nothing; a renew "
                    "whose durability is in doubt answers an unknown outcome (contract §4, §5 Renew, §8).",
                    [*op.indices, *shown.indices], tuple=list(key), epoch=str(e), f="renew", code=op.code,
                )
                break


def _releases(out: Findings, h: History, ctx: dict) -> None:
    seeded = set()
    init = ctx.get("initial_durable")
    for c in (init.get("claims") or []) if isinstance(init, dict) else []:
        if isinstance(c, dict) and c.get("active") is None:
            seeded.add(((c.get("ledger_namespace"), c.get("item_id")), str(c.get("last_epoch"))))
    freed: set[tuple] = set()  # (tuple, epoch) a release did or may have freed
    refused: dict[tuple, object] = {}
    shown: dict[tuple, object] = {}
    for op in h.ops:
        key = op.key
        if key is None:
            continue
        if op.f == "release" and op.epoch is not None:
            if op.type == "ok" or op.uncertain:
                freed.add((key, op.epoch))
            elif op.type == "fail":
                refused.setdefault((key, op.epoch), op)
        if op.definite and op.le is not None and op.le > 0 and op.active is None:
            shown.setdefault((key, op.le), op)
    for (key, e), op in refused.items():
        proof = shown.get((key, e))
        if proof is None or (key, e) in freed or (key, str(e)) in seeded:
            continue
        out.add(
            "unchanged-reply-took-effect",
            f"Tuple {fmt_tuple(key)}: release of epoch {e} by {op.owner!r} was refused with {op.code} (state "
            f"unchanged), yet {proof.f} (op {proof.i}) shows last_epoch {e} with no active claim, and no other "
            "release of that epoch succeeded or may have. Only a release frees an epoch's claim; a refusal "
            "changes nothing (contract §4, §5 Release, §8).",
            [*op.indices, *proof.indices], tuple=list(key), epoch=str(e), f="release", code=op.code,
        )


def _publishes(out: Findings, h: History) -> None:
    attempts: dict[tuple, list] = {}
    for op in h.ops:
        if op.f == "publish" and op.oid is not None and op.digest is not None:
            attempts.setdefault((op.oid, op.digest), []).append(op)
    for oid, (spec, proof, digest) in revealed_outcomes(h).items():
        ops = attempts.get((oid, digest))
        if not ops or any(op.type != "fail" or op.code in _MAY_STORE for op in ops):
            continue
        op = ops[0]
        out.add(
            "unchanged-reply-took-effect",
            f"Operation {oid}: every attempt was refused with a code that stores nothing "
            f"({', '.join(sorted({o.code or '?' for o in ops}))}, state unchanged), yet "
            + (f"a publication read (op {proof.i})" if proof is not None else "the final durable state")
            + f" holds its stored outcome ({spec[0]}). A refusal changes nothing and stores no outcome "
            "(contract §4, §6, §8).",
            [i for o in ops for i in o.indices] + (proof.indices if proof is not None else [h.final_index]),
            operation_id=oid, f="publish", stored=spec[0],
        )
