"""Stale writes: every ledger revision that ever existed was written by a
publication accepted under the then-active fence and the expected revision.

Contract §6 steps 6-9 (one serialized commit boundary: fence, then revision,
then the exact candidate bytes) and §1 ("A backend is safely fenced only if
one transactional coordinator serializes ... every write path"). Checks:

1. each accepted (ok) publish was accepted with a live fence at its decision
   time ``T`` (its ``claim_read_back.observed_at``): its own read-back shows the
   fence's owner and epoch active and unexpired; no greater epoch of the tuple
   was issued before ``T``; its epoch was not released before ``T``; and its
   provable expiry (no uncertain renew) was not already past at ``T``;
2. its ``committed_revision`` is its ``candidate_sha256``;
3. per tuple, accepted publishes in decision-time order form a revision chain:
   each ``expected_revision`` is the previous accepted candidate (or the seeded
   revision) - unless an uncertain publish (``info``) with that candidate may
   have committed in between. A publish whose own reply was lost but which a
   later read proves committed (a ``publication-read`` or the final state
   shows its stored success) is accepted, at the decision time that stored
   envelope states: overwriting it is a lost update like any other;
4. every revision observed anywhere (ok publishes, ``actual_revision`` of
   revision conflicts, the final durable ledgers) is the seeded revision or the
   candidate of a publication that was or may have been accepted. A rejected
   candidate that shows up as a revision is a write that bypassed the fence.

The seeded revisions come from ``ctx["initial_durable"]`` or
``ctx["initial_revisions"]``; without them the first publish request's
``expected_revision`` per tuple is assumed to be the seed (stats say so).
"""

from __future__ import annotations

import bisect

from . import leases as _leases
from ._common import BAD, Findings, History, Op, at, fmt_tuple, initial_revisions, once, prepare


def revealed_outcomes(h: History) -> dict[str, tuple[tuple, Op | None, str | None]]:
    """``operation_id -> (outcome spec, op that shows it, operation_digest)`` for every stored
    publication outcome a ``publication-read`` or the final durable state
    shows (``op`` None: the final state); ``checkers.history.outcome_spec``
    says what a spec holds. Cached on the history."""
    got = h.derived.get("revealed_outcomes")
    if got is not None:
        return got
    out: dict[str, tuple[tuple, Op | None, str | None]] = {}
    for op in h.ops:
        if op.f == "publication-read" and op.type == "ok":
            oid, dg, _ex, _env, spec, _code = op.outcome
            if oid is not None and spec is not None and oid not in out:
                out[oid] = (spec, op, dg)
    if h.final is not None:
        for oid, _ns, _item, dg, _ex, _env, spec, _code in h.final.outcomes:
            if isinstance(oid, str) and spec is not None and oid not in out:
                out[oid] = (spec, None, dg)
    h.derived["revealed_outcomes"] = out
    return out


def check(history, ctx: dict | None = None) -> dict:
    """(computed once per history and context: ``capability_honesty`` builds on it)"""
    return once(prepare(history), "stale_write", _check, ctx if ctx is not None else {})


def _check(history, ctx: dict) -> dict:
    ctx = ctx or {}
    h = prepare(history)
    out = Findings()
    lease_map = _leases.build(h)
    seeds = initial_revisions(ctx)
    assumed = seeds is None
    seeds = dict(seeds or {})
    revealed = revealed_outcomes(h)

    accepted: dict[tuple, list[tuple[int, Op, Op | None]]] = {}  # (decision time, publish, proof of commit)
    possible: dict[tuple, set[str]] = {}  # candidates that were or may have been accepted
    maybe: dict[tuple, set[str]] = {}  # candidates of uncertain publishes not proven either way
    seen_oids: set[tuple] = set()  # (operation id, tuple): an outcome is stored per (id, namespace, item)
    legacy: set[tuple] = set()  # tuples a legacy write may have changed: their bytes are not ours to judge
    uncertain: list[Op] = []
    for op in h.ops:
        if op.f in ("legacy-create", "legacy-transition") and op.type != "fail" and op.key:
            legacy.add(op.key)
        if op.f != "publish":
            continue
        key = op.key
        if key is None:
            continue
        if assumed and key not in seeds and op.exp_rev is not None:
            seeds[key] = op.exp_rev
        cand = op.cand
        if op.type == "ok" and op.exit is not None:
            possible.setdefault(key, set()).add(cand)
            if (op.oid, key) in seen_oids:
                continue  # a replay of the same accepted request
            seen_oids.add((op.oid, key))
            if op.t is not None:
                accepted.setdefault(key, []).append((op.t, op, None))
        elif op.uncertain:
            possible.setdefault(key, set()).add(cand)
            uncertain.append(op)
    for op in uncertain:  # lost replies: a later read may show what was stored
        spec, proof, digest = revealed.get(op.oid, (None, None, None))
        if spec is None:
            maybe.setdefault(op.key, set()).add(op.cand)
        elif spec[0] == "ok" and digest == op.digest and spec[1] == op.cand and spec[3] is not None \
                and (op.oid, op.key) not in seen_oids:
            seen_oids.add((op.oid, op.key))
            accepted.setdefault(op.key, []).append((spec[3], op, proof))

    for key, rows in accepted.items():
        gens = lease_map.get(key, {})
        issued = sorted((g.issued_ms, e) for e, g in gens.items() if g.issued_ms is not None)
        times = [i for i, _ in issued]
        prefix_max, m = [], 0
        for _, e in issued:
            m = max(m, e)
            prefix_max.append(m)
        for t, op, proof in rows:
            if proof is None and op.type == "ok":
                _check_fence(out, key, t, op, gens, times, prefix_max)
        if key not in legacy:
            _check_chain(out, key, rows, seeds.get(key), maybe.get(key, set()))

    observed = 0
    for op in h.ops:
        key = op.key
        if op.f != "publish" or key is None or not op.definite:
            continue
        rev, what = None, ""
        if op.type == "ok":
            rev, what = op.committed, "committed_revision"
        elif op.code == "ledger-revision-conflict":
            rev, what = op.conflict_revisions[1], "actual_revision of a revision conflict"
        if isinstance(rev, str):
            observed += 1
            _check_known(out, key, rev, what, op.indices, seeds, possible, legacy)

    fin = h.final
    for key, (rev, actual) in (fin.ledgers.items() if fin is not None else ()):
        if not isinstance(rev, str) or (assumed and key not in seeds):
            continue  # no seed known for a tuple nobody published: nothing to compare with
        observed += 1
        if actual != rev:
            out.add(
                "ledger-bytes-mismatch",
                f"Tuple {fmt_tuple(key)}: the final durable ledger claims revision {rev} but its bytes digest to "
                f"{actual}. A revision is the sha256 of the exact item bytes (contract §6; vectors.md §10).",
                [fin.index], tuple=list(key), revision=rev, bytes_digest=actual,
            )
        _check_known(out, key, rev, "final durable revision", [fin.index], seeds, possible, legacy)

    stats = {"accepted_publishes": sum(len(r) for r in accepted.values()), "observed_revisions": observed,
             "seed_revisions_assumed": assumed, "tuples_with_legacy_writes": len(legacy),
             "commits_proven_by_reads": sum(1 for r in accepted.values() for row in r if row[1].uncertain)}
    return out.result(stats)


def _check_fence(out: Findings, key, t: int, op: Op, gens, times, prefix_max) -> None:
    e, owner = op.epoch, op.owner
    active = op.active
    reasons = []
    if op.fence_key != key:
        reasons.append("the fence names a different tuple")
    if active is None or active is BAD:
        reasons.append("its own claim_read_back shows no active claim")
    elif active[0] != owner or active[1] != e:
        reasons.append(f"its own claim_read_back shows owner {active[0]!r} epoch {active[1]}")
    elif (active[3] or 0) <= t:
        reasons.append(f"its own claim_read_back shows the claim expired at {at(active[3])}")
    if not op.fence_echo:
        reasons.append("the reply's claim_fence is not the submitted fence")
    proof: list[int] = []
    if e is not None:
        j = bisect.bisect_left(times, t) - 1  # generations issued strictly before t
        if j >= 0 and prefix_max[j] > e:
            newer = prefix_max[j]
            reasons.append(f"epoch {newer} was issued at {gens[newer].issued}, before the decision")
            proof += gens[newer].first_op.indices
        g = gens.get(e)
        if g is not None and g.owner == owner:
            if g.release_ms is not None and g.release_ms < t:
                reasons.append("the fence's epoch had been released before the decision")
                proof += g.release_op.indices
            elif (not g.uncertain_end and g.exp_at_ms is not None and g.exp_at_ms <= t
                  and g.exp_hi_ms is not None and g.exp_hi_ms <= t):
                reasons.append("the fence's lease had provably expired before the decision")
                proof += g.exp_op.indices
    if reasons:
        out.add(
            "stale-fence-accepted",
            f"Tuple {fmt_tuple(key)}: publish {op.oid} with fence owner {owner!r} epoch "
            f"{e} was accepted at {at(t)}, but " + "; ".join(reasons) + ". A publication commits "
            "only under the active, unexpired owner generation, checked inside the commit boundary "
            "(contract §6 step 7).",
            [*op.indices, *proof], tuple=list(key), operation_id=op.oid,
            fence_epoch=None if e is None else str(e), decided_at=at(t), reasons=reasons,
        )
    if op.committed != op.cand:
        out.add(
            "committed-revision-mismatch",
            f"Tuple {fmt_tuple(key)}: publish {op.oid} reports committed_revision "
            f"{op.committed}, not its candidate {op.cand}. Publication "
            "writes the exact candidate bytes (contract §6 step 9).",
            op.indices, tuple=list(key), operation_id=op.oid,
        )


def _check_chain(out: Findings, key, rows, seed: str | None, maybe: set[str]) -> None:
    rows = sorted(rows, key=lambda r: r[0])
    current, prev = seed, None
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][0] == rows[i][0]:
            j += 1
        group = list(rows[i:j])
        while group:  # equal decision times: follow the chain greedily
            pick = next((r for r in group if r[1].exp_rev == current), group[0])
            group.remove(pick)
            _t, op, proof = pick
            exp = op.exp_rev
            if current is not None and exp != current and exp not in maybe:
                shown = [] if prev is None or prev[2] is None else prev[2].indices
                by = ""
                if prev is not None:
                    by = f"(written by {prev[1].oid}"
                    if prev[2] is not None:
                        by += f", whose own reply was lost but a later read (op {prev[2].i}) shows it committed). "
                    elif prev[1].uncertain:
                        by += ", whose own reply was lost but the final durable state holds its stored success). "
                    else:
                        by += "). "
                out.add(
                    "revision-chain-broken",
                    f"Tuple {fmt_tuple(key)}: publish {op.oid} was accepted with "
                    f"expected_revision {exp}, but the durable revision was {current} "
                    + (by or "(the seed). ")
                    + "The durable revision must equal expected_revision, inside the same commit boundary - "
                    "otherwise an update is lost (contract §6 step 8).",
                    [*(prev[1].indices if prev else []), *shown, *op.indices,
                     *(proof.indices if proof is not None else [])], tuple=list(key),
                    expected_revision=exp, durable_revision=current,
                )
            current, prev = op.cand, pick
        i = j


def _check_known(out, key, rev, what, ops, seeds, possible, legacy) -> None:
    if key in legacy or rev == seeds.get(key) or rev in possible.get(key, ()):
        return
    out.add(
        "unaccepted-revision",
        f"Tuple {fmt_tuple(key)}: {what} is {rev}, which is neither the seeded revision nor the candidate "
        "of any publication that was (or may have been) accepted. Something wrote the ledger outside the "
        "fenced publication path (contract §1, §3 write-path closure, §6).",
        ops, tuple=list(key), revision=rev,
    )
