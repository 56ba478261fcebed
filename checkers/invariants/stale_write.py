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
   have committed in between;
4. every revision observed anywhere (ok publishes, ``actual_revision`` of
   revision conflicts, the final durable ledgers) is the seeded revision or the
   candidate of a publication that was or may have been accepted. A rejected
   candidate that shows up as a revision is a write that bypassed the fence.

The seeded revisions come from ``ctx["initial_durable"]`` or
``ctx["initial_revisions"]``; without them the first publish request's
``expected_revision`` per tuple is assumed to be the seed (stats say so).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib

from . import leases as _leases
from ._common import Findings, Op, epoch_int, fmt_tuple, initial_revisions, instant_ms, obj, prepare


def check(history: list[dict], ctx: dict | None = None) -> dict:
    ctx = ctx or {}
    prep = prepare(history)
    out = Findings()
    lease_map = _leases.build(prep)
    seeds = initial_revisions(ctx)
    assumed = seeds is None
    seeds = dict(seeds or {})

    accepted: dict[tuple, list[tuple[int, Op]]] = {}
    possible: dict[tuple, set[str]] = {}  # candidates that were or may have been accepted
    maybe: dict[tuple, set[str]] = {}  # candidates of uncertain publishes only
    seen_oids: set[tuple] = set()
    legacy: set[tuple] = set()  # tuples a legacy write may have changed: their bytes are not ours to judge
    for op in prep.ops:
        if op.f in ("legacy-create", "legacy-transition") and op.type != "fail" and op.tuple():
            legacy.add(op.tuple())
        if op.f != "publish":
            continue
        key = op.tuple()
        if key is None:
            continue
        if assumed and key not in seeds and isinstance(op.req.get("expected_revision"), str):
            seeds[key] = op.req["expected_revision"]
        cand = op.req.get("candidate_sha256")
        if op.type == "ok" and op.env is not None:
            possible.setdefault(key, set()).add(cand)
            oid = (op.req.get("operation_id"), key)  # an outcome is stored per (id, namespace, item)
            if oid in seen_oids:
                continue  # a replay of the same accepted request
            seen_oids.add(oid)
            t = instant_ms(obj(op.result().get("claim_read_back")).get("observed_at"))
            if t is not None:
                accepted.setdefault(key, []).append((t, op))
        elif op.uncertain:
            possible.setdefault(key, set()).add(cand)
            maybe.setdefault(key, set()).add(cand)

    for key, rows in accepted.items():
        gens = lease_map.get(key, {})
        issued = sorted((g.issued_ms, e) for e, g in gens.items() if g.issued_ms is not None)
        times = [i for i, _ in issued]
        prefix_max, m = [], 0
        for _, e in issued:
            m = max(m, e)
            prefix_max.append(m)
        for t, op in rows:
            _check_fence(out, key, t, op, gens, times, prefix_max)
        if key not in legacy:
            _check_chain(out, key, rows, seeds.get(key), maybe.get(key, set()))

    observed = 0
    for op in prep.ops:
        key = op.tuple()
        if op.f != "publish" or key is None or not op.definite:
            continue
        rev, what = None, ""
        if op.type == "ok":
            rev, what = op.result().get("committed_revision"), "committed_revision"
        elif op.code() == "ledger-revision-conflict":
            rev, what = op.details().get("actual_revision"), "actual_revision of a revision conflict"
        if isinstance(rev, str):
            observed += 1
            _check_known(out, key, rev, what, op.indices, seeds, possible, legacy)

    fin = prep.final_durable
    for led in (fin.get("ledgers") if isinstance(fin, dict) else None) or []:
        led = obj(led)
        key, rev = (led.get("ledger_namespace"), led.get("item_id")), led.get("revision")
        if not isinstance(rev, str) or (assumed and key not in seeds):
            continue  # no seed known for a tuple nobody published: nothing to compare with
        observed += 1
        try:
            actual = "sha256:" + hashlib.sha256(base64.b64decode(led.get("source_base64", ""), validate=True)).hexdigest()
        except (binascii.Error, TypeError, ValueError):
            actual = None
        if actual != rev:
            out.add(
                "ledger-bytes-mismatch",
                f"Tuple {fmt_tuple(key)}: the final durable ledger claims revision {rev} but its bytes digest to "
                f"{actual}. A revision is the sha256 of the exact item bytes (contract §6; vectors.md §10).",
                [prep.final_index], tuple=list(key), revision=rev, bytes_digest=actual,
            )
        _check_known(out, key, rev, "final durable revision", [prep.final_index], seeds, possible, legacy)

    stats = {"accepted_publishes": sum(len(r) for r in accepted.values()), "observed_revisions": observed,
             "seed_revisions_assumed": assumed, "tuples_with_legacy_writes": len(legacy)}
    return out.result(stats)


def _check_fence(out: Findings, key, t: int, op: Op, gens, times, prefix_max) -> None:
    fence = obj(op.req.get("claim_fence"))
    e, owner = epoch_int(fence.get("epoch")), fence.get("owner_id")
    r = op.result()
    crb = obj(r.get("claim_read_back"))
    active = obj(crb.get("active"))
    at = crb.get("observed_at")
    reasons = []
    if (fence.get("ledger_namespace"), fence.get("item_id")) != key:
        reasons.append("the fence names a different tuple")
    if not active:
        reasons.append("its own claim_read_back shows no active claim")
    elif active.get("owner_id") != owner or epoch_int(active.get("epoch")) != e:
        reasons.append(f"its own claim_read_back shows owner {active.get('owner_id')!r} epoch {active.get('epoch')}")
    elif (instant_ms(active.get("expires_at")) or 0) <= t:
        reasons.append(f"its own claim_read_back shows the claim expired at {active.get('expires_at')}")
    if r.get("claim_fence") != fence:
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
            f"Tuple {fmt_tuple(key)}: publish {op.req.get('operation_id')} with fence owner {owner!r} epoch "
            f"{fence.get('epoch')} was accepted at {at}, but " + "; ".join(reasons) + ". A publication commits "
            "only under the active, unexpired owner generation, checked inside the commit boundary "
            "(contract §6 step 7).",
            [*op.indices, *proof], tuple=list(key), operation_id=op.req.get("operation_id"),
            fence_epoch=fence.get("epoch"), decided_at=at, reasons=reasons,
        )
    if r.get("committed_revision") != op.req.get("candidate_sha256"):
        out.add(
            "committed-revision-mismatch",
            f"Tuple {fmt_tuple(key)}: publish {op.req.get('operation_id')} reports committed_revision "
            f"{r.get('committed_revision')}, not its candidate {op.req.get('candidate_sha256')}. Publication "
            "writes the exact candidate bytes (contract §6 step 9).",
            op.indices, tuple=list(key), operation_id=op.req.get("operation_id"),
        )


def _check_chain(out: Findings, key, rows, seed: str | None, maybe: set[str]) -> None:
    rows = sorted(rows, key=lambda r: r[0])
    current, prev_op = seed, None
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][0] == rows[i][0]:
            j += 1
        group = [op for _t, op in rows[i:j]]
        while group:  # equal decision times: follow the chain greedily
            pick = next((op for op in group if op.req.get("expected_revision") == current), group[0])
            group.remove(pick)
            exp = pick.req.get("expected_revision")
            if current is not None and exp != current and exp not in maybe:
                out.add(
                    "revision-chain-broken",
                    f"Tuple {fmt_tuple(key)}: publish {pick.req.get('operation_id')} was accepted with "
                    f"expected_revision {exp}, but the durable revision was {current} "
                    + (f"(written by {prev_op.req.get('operation_id')}). " if prev_op else "(the seed). ")
                    + "The durable revision must equal expected_revision, inside the same commit boundary - "
                    "otherwise an update is lost (contract §6 step 8).",
                    [*(prev_op.indices if prev_op else []), *pick.indices], tuple=list(key),
                    expected_revision=exp, durable_revision=current,
                )
            current, prev_op = pick.req.get("candidate_sha256"), pick
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
