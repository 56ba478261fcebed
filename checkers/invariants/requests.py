"""Publication requests a backend must refuse before deciding anything
(contract §6 steps 1-5): what it accepted must have been a complete,
well-formed request with a valid candidate.

1. ``incomplete-request-accepted`` (§6): "Every public commit attempt,
   including a retry after response loss, MUST carry the complete request.
   An operation ID alone is not a retry request and returns exit 2
   invalid-request". A publish whose request lacks a member of the publish
   object got any definite reply other than ``invalid-request``.
2. ``candidate-digest-accepted`` (§6 step 2): "Its SHA-256 MUST equal
   candidate_sha256". An accepted (exit 0) publish whose candidate bytes do
   not hash to its ``candidate_sha256``.
3. ``invalid-candidate-accepted`` (§6 step 5): "Candidate validation MUST
   parse the complete replacement bytes as a schema version 1 ledger item
   and require its canonical id to equal the request's item_id". An accepted
   publish whose candidate is not such an item (judged by the contract's own
   validator, ``backends.contract.ledger_invalid_details``).

4. ``noncanonical-request-decided`` (§5: "Unknown members, wrong types,
   noncanonical values, and unprovisioned namespaces are exit 2
   invalid-request; no authoritative lease decision has then occurred"; §6
   step 2): a publish, acquire, renew or release whose request breaks its
   schema (``backends.contract.schemas.first_invalid_pointer``: a fence
   ``owner_id`` outside the owner grammar, an epoch above 2^64 - 1, an
   unknown member...) got any definite reply other than ``invalid-request``.

In 1 and 4, ``claim-store-unavailable`` is no decision either: the backend
could not reach its store, and the contract lets it say so before it has
read the request (§8).

"Accepted" in 2 and 3 includes a reply decided by a later step of §6's
precedence ("the first failure wins"): a wrong digest answered with a
namespace, idempotency, candidate, fence, revision or floor failure (steps
3-9), or an invalid candidate answered with a fence, revision or floor
failure (steps 6-8), was let through the step that had to refuse it (a slow
call whose lease ran out meets the fence before anything is written).

The raw request is needed, so ``request_problems`` (``checkers.raw.requests``)
runs while the history is read (``checkers.history``, like the envelope shape
check); ``check`` reports what it found for replies that prove what happened.
"""

from __future__ import annotations

from checkers.raw.requests import CHECKED_OPS, request_problems  # noqa: F401 - named here too (the rules' home)

from ._common import Findings, prepare


def check(history, ctx: dict | None = None) -> dict:
    h = prepare(history)
    out = Findings()
    for op, kind, data in h.request_problems:
        if not op.definite:
            continue
        oid = op.oid
        if kind == "incomplete-request-accepted":
            out.add("incomplete-request-accepted",
                    f"Operation {oid}: a publish without {', '.join(data['missing'])} got exit {op.exit} "
                    f"{data['code'] or 'success'} instead of exit 2 invalid-request. Every commit attempt, a "
                    "retry after a lost reply included, carries the complete request; an operation id alone "
                    "is not a retry (contract §6).", op.indices, operation_id=oid, **data)
        elif kind == "candidate-digest-accepted":
            out.add("candidate-digest-accepted",
                    f"Operation {oid}: {_let_through(data['code'])} a candidate whose bytes hash to {data['digest'][:19]}... "
                    f"although the request names candidate_sha256 {str(data['candidate_sha256'])[:19]}...; "
                    "the digest must match before anything is decided (contract §6 step 2, "
                    "candidate-digest-mismatch).", op.indices, operation_id=oid, **data)
        elif kind == "noncanonical-request-decided":
            what = f"operation {oid}: a publish" if data["op"] == "publish" else f"a {data['op']}"
            out.add("noncanonical-request-decided",
                    f"{what[0].upper()}{what[1:]} whose {data['pointer'] or 'request'} is {data['value']} got exit "
                    f"{op.exit} {data['code'] or 'success'} instead of exit 2 invalid-request: a request with an "
                    "unknown member, a wrong type or a noncanonical value is refused before any decision "
                    "(contract §5; §6 step 2; §2 owner_id and epoch grammar).", op.indices,
                    **({"operation_id": oid} if data["op"] == "publish" else {}), **data)
        else:
            out.add("invalid-candidate-accepted",
                    f"Operation {oid}: {_let_through(data['code'])} a candidate that is not a valid schema-1 ledger item with id "
                    f"{data['item_id']} ({_summary(data['issues'])}). Candidate validation comes before any "
                    "decision (contract §6 step 5, ledger-invalid).", op.indices, operation_id=oid, **data)
    return out.result({"publishes_judged": sum(1 for op in h.ops if op.f == "publish" and op.definite)})


def _let_through(code) -> str:
    return "accepted" if code is None else f"answered {code}, a later step of the precedence, to"


def _summary(issues) -> str:
    rows = issues if isinstance(issues, list) else [issues]
    return "; ".join(str(r.get("reason") or r.get("code") or r) for r in rows[:3] if isinstance(r, dict)) or "invalid"
