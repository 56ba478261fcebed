"""Idempotence of ``publish-claimed`` by ``operation_id`` (contract §6 step 4, §8).

``operation_id`` names one immutable request; the backend stores its digest
with the terminal outcome and compares it *before* any revision, clock, fence
or ledger decision. The stored outcome is keyed by ``(operation_id,
ledger_namespace, item_id)`` (vectors.md §8.6 commit step 2, and
``ledger-publication.read`` takes that triple), so the same id under another
item is another identity: a backend may decide it afresh, or refuse it with
``idempotency-conflict`` if it keys by the id alone; both are accepted. Stored terminal outcomes are the success (exit 0) and the
fence rejection (vectors.md §8.6 commit steps 7, 9); a revision conflict may
or may not be stored (§8.6 preflight step 6 vs commit step 8).
Checks:

1. identical requests (same ``operation_digest``) that got a stored-kind
   reply all got the *same* envelope - a replay is verbatim, never re-executed;
2. two different requests under one ``operation_id`` never both get a stored
   outcome (at most one write per id);
3. once an outcome is stored (its reply completed), a later different request
   under that id gets ``idempotency-conflict`` (or an earlier-step validation
   error), and a later identical retry gets the stored envelope, not a fresh
   decision;
4. ``idempotency-conflict`` details name the submitted request's digest as
   ``actual_operation_digest`` and a different ``expected_operation_digest``,
   the digest of a request submitted under that id before (on any item);
5. ``ledger-publication.read`` returns the digest of a submitted request and the
   stored ``{exit, stdout}``; the final durable outcomes hold each id once.
"""

from __future__ import annotations

from ._common import Findings, Op, prepare

#: rejections that are always stored. A revision conflict is stored when found
#: inside the commit boundary but not when found at validation time (vectors.md
#: §8.6 preflight step 6, §13.1), so its reply proves nothing either way.
STORED_CODES = frozenset(("claim-fence-rejected",))
#: validation steps 1-3 come before the idempotency lookup (step 4)
PRE_LOOKUP_CODES = frozenset(("invalid-request", "candidate-digest-mismatch", "ledger-namespace-unbound",
                              "capability-unavailable"))
#: replies that decided nothing at all (§8: "no authoritative decision was possible and nothing
#: changed"): neither a replay nor a conflict was owed
NO_DECISION_CODES = frozenset(("claim-store-unavailable",))


def is_stored_kind(op: Op) -> bool:
    return op.definite and (op.exit == 0 or op.code in STORED_CODES)


def check(history, ctx: dict | None = None) -> dict:
    prep = prepare(history)
    out = Findings()
    groups: dict[tuple, list[tuple[Op, str | None]]] = {}  # (oid, (ns, item)) -> attempts
    for op in prep.ops:
        if op.f == "publish" and op.oid is not None:
            groups.setdefault((op.oid, op.key), []).append((op, op.digest))

    stored_env: dict[tuple[str, str], tuple[Op, int | None, bytes]] = {}  # (oid, digest) -> first stored reply
    for (oid, _key), rows in groups.items():
        first_stored: dict[str, Op] = {}
        for op, d in rows:
            if d is None or not is_stored_kind(op):
                continue
            prev = first_stored.get(d)
            if prev is None:
                first_stored[d] = op
                stored_env[(oid, d)] = (op, op.exit, op.env_id)
            elif prev.env_id != op.env_id:
                out.add(
                    "replay-differs",
                    f"Operation {oid}: two identical requests (digest {d[:19]}...) got different stored "
                    f"replies (exit {prev.exit} vs {op.exit}). A retry with the same operation_id and request "
                    "must return the stored terminal envelope verbatim, without a second ledger write "
                    "(contract §6 step 4, §8).",
                    [*prev.indices, *op.indices], operation_id=oid, digest=d,
                    replies=[[prev.exit, prev.code], [op.exit, op.code]],
                )
        if len(first_stored) > 1:
            (d1, a), (d2, b) = list(first_stored.items())[:2]
            out.add(
                "operation-id-bound-twice",
                f"Operation {oid}: two different requests ({d1[:19]}... and {d2[:19]}...) both got a stored "
                f"outcome (exit {a.exit} and exit {b.exit}). An operation_id identifies one immutable request; "
                "reusing it with different bytes or fence must fail with idempotency-conflict (contract §6 step 4).",
                [*a.indices, *b.indices], operation_id=oid, digests=[d1, d2],
            )
        if not first_stored:
            _check_conflict_details(out, oid, rows)
            continue
        # the first stored reply in real time, then what later attempts must get
        first = min(first_stored.items(), key=lambda kv: kv[1].cp)
        d0, s0 = first
        for op, d in rows:
            if op.ip <= s0.cp or not op.definite or d is None:
                continue
            code = op.code
            if code in NO_DECISION_CODES:
                continue
            if d != d0 and code != "idempotency-conflict" and code not in PRE_LOOKUP_CODES:
                out.add(
                    "idempotency-conflict-missing",
                    f"Operation {oid}: after an outcome was stored for one request, a different request under "
                    f"the same operation_id got exit {op.exit} {code or 'success'} instead of exit 4 "
                    "idempotency-conflict (contract §6 step 4).",
                    [*s0.indices, *op.indices], operation_id=oid, stored_digest=d0, submitted_digest=d,
                )
            elif d == d0 and not is_stored_kind(op) and code not in PRE_LOOKUP_CODES:
                out.add(
                    "retry-not-replayed",
                    f"Operation {oid}: an identical retry after the stored outcome got exit {op.exit} {code} "
                    "instead of the stored envelope. The durable operation_id lookup comes before every "
                    "later decision (contract §6 step 4).",
                    [*s0.indices, *op.indices], operation_id=oid, digest=d,
                )
        _check_conflict_details(out, oid, rows)

    by_id: dict[str, list] = {}
    for (oid, _key), rows in groups.items():
        by_id.setdefault(oid, []).extend(rows)
    _check_conflicts_are_bound(out, by_id)
    reads = _check_publication_reads(out, prep, by_id, stored_env)
    _check_final_outcomes(out, prep, stored_env)
    return out.result({"operation_ids": len(groups), "stored_outcomes_seen": len(stored_env),
                       "publication_reads": reads})


def _check_conflict_details(out: Findings, oid: str, rows: list[tuple[Op, str | None]]) -> None:
    for op, d in rows:
        if op.code != "idempotency-conflict" or d is None:
            continue
        expected, actual = op.conflict_digests
        det = {"expected_operation_digest": expected, "actual_operation_digest": actual}
        if actual != d or expected == d:
            out.add(
                "idempotency-conflict-details",
                f"Operation {oid}: idempotency-conflict reports actual digest {actual} "
                f"and expected {expected}, but the submitted request digests to {d}. "
                "A conflict names the stored digest and the submitted one, which differ (contract §6 step 4; "
                "vectors.md §8.6 commit step 2).",
                op.indices, operation_id=oid, submitted_digest=d, details=det,
            )


def _check_conflicts_are_bound(out: Findings, by_id: dict) -> None:
    """An idempotency-conflict says the id is already bound to another request: the
    digest it names as stored must be one submitted under that id (on any item: a
    backend may key by the id alone) by a request invoked before the refusal returned."""
    for oid, rows in by_id.items():
        for op, d in rows:
            if op.code != "idempotency-conflict" or d is None or op.cp is None:
                continue
            expected = op.conflict_digests[0]
            if expected == d:
                continue  # named by idempotency-conflict-details
            if not any(d2 == expected and o2.ip < op.cp for o2, d2 in rows if o2 is not op):
                out.add(
                    "idempotency-conflict-unbound",
                    f"Operation {oid}: idempotency-conflict names stored digest {str(expected)[:19]}..., but no "
                    "request with that digest was submitted under this id before the refusal. The refusal is "
                    "owed only to an id already bound to a different request (contract §6 step 4).",
                    op.indices, operation_id=oid, expected_operation_digest=expected, submitted_digest=d,
                )


def _check_publication_reads(out, prep, groups, stored_env) -> int:
    n = 0
    for op in prep.ops:
        if op.f != "publication-read" or op.type != "ok" or op.exit is None:
            continue
        n += 1
        oid, digest, outcome_exit, outcome_id, _spec, code = op.outcome
        if code == UNKNOWN_OUTCOME:
            _unknown_stored(out, oid, op.indices, "the publication read returned")
        submitted = {d for _op, d in groups.get(oid, ())}
        if submitted and digest not in submitted:
            out.add(
                "publication-read-digest",
                f"Operation {oid}: the publication read reports digest {digest}, which is not the digest of any "
                "request submitted under that id. The stored digest is the canonical digest of the complete "
                "request (contract §6).",
                op.indices, operation_id=oid, digest=digest, submitted=sorted(d for d in submitted if d),
            )
            continue
        seen = stored_env.get((oid, digest))
        if seen is not None and outcome_id != seen[2]:
            out.add(
                "publication-read-differs",
                f"Operation {oid}: the publication read returned an outcome (exit {outcome_exit}) that "
                f"differs from the stored reply the writer got (exit {seen[1]}). The read exposes the stored "
                "terminal outcome exactly (contract §6; vectors.md §8.7).",
                [*seen[0].indices, *op.indices], operation_id=oid, digest=digest,
            )
    return n


UNKNOWN_OUTCOME = "publication-outcome-unknown"


def _unknown_stored(out, oid: str, indices: list, where: str) -> None:
    out.add(
        "unknown-outcome-stored",
        f"Operation {oid}: {where} a stored outcome publication-outcome-unknown. \"Unknown\" is the reply of "
        "a publish that could not tell which side of its commit it ended on, never a terminal outcome: the "
        "caller reads the outcome by operation id to learn it, and a failure before the commit leaves "
        "ledger and outcome unchanged, the read then answering operation-not-found (contract §6; the "
        "vector publication-outcome-unknown).",
        indices, operation_id=oid,
    )


def _check_final_outcomes(out, prep, stored_env) -> None:
    fin = prep.final
    if fin is None:
        return
    seen: set = set()
    for oid, ns, item, digest, exit_code, env_id, _spec, code in fin.outcomes:
        key = (oid, ns, item)
        if code == UNKNOWN_OUTCOME:
            _unknown_stored(out, oid, [fin.index], "the final durable state holds")
        if key in seen:
            out.add(
                "duplicate-stored-outcome",
                f"Operation {oid}: the final durable state holds two outcomes for one operation identity. "
                "At most one terminal outcome (and one write) per operation_id (contract §6, §8).",
                [fin.index], operation_id=oid,
            )
        seen.add(key)
        mine = stored_env.get((oid, digest))
        if mine is not None and env_id != mine[2]:
            out.add(
                "stored-outcome-differs",
                f"Operation {oid}: the durable outcome (exit {exit_code}) differs from the reply the "
                f"writer received (exit {mine[1]}). The stored envelope is the one first returned "
                "(contract §8; vectors.md §3.1).",
                [*mine[0].indices, fin.index], operation_id=oid,
            )
