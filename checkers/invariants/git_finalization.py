"""Git finalization: on a merge-coordinated (Git-backed) ledger, every
acknowledged publication whose agent committed it is finalized in Git, with
exactly its bytes, and a correct run leaves ``claim-verify`` with no findings.

Contract §3 (merge-coordinated profile: "claim-verify reconciles pending
publication outcomes against the working tree and Git HEAD"), §6, and the
program's own README ("Commit each mutation before the next one"). The run's
agents commit each acknowledged publication (``commit`` ops: the harness's
record says whether ``HEAD`` then held exactly the candidate bytes), the final
phase commits what is left and runs ``claim-verify`` on every ledger (``verify``
ops). Checks, against the LAST ``verify`` of each namespace:

1. it answered exit 0 (a verify that could not run proves nothing: ``unknown``);
2. its ``findings`` are empty (each one is a ``claim-verify-finding``);
3. every acknowledged publication (exit 0) is listed in its ``publications``
   with the committed revision it was acknowledged with;
4. every publication whose own commit put its candidate into ``HEAD`` is
   ``git_finalized``, and the commit it names holds exactly those bytes (the
   final-state ``git.items`` history, read with plain ``git``).

A history without ``verify`` ops (no Git-backed ledger) passes vacuously: this
checker says so in its stats.
"""

from __future__ import annotations

from ._common import Findings, obj, prepare


def check(history: list[dict], ctx: dict | None = None) -> dict:
    prep = prepare(history)
    out = Findings()
    verifies: dict[str, object] = {}
    committed: list = []       # commit ops that put a publication's bytes into HEAD
    acked: list = []           # publish ops answered exit 0
    for op in prep.ops:
        if op.f == "verify":
            ns = op.req.get("ledger_namespace")
            if isinstance(ns, str):
                verifies[ns] = op   # the last one wins (invoke order)
        elif op.f == "commit" and op.type == "ok" and not op.req.get("all"):
            if obj(op.result()).get("committed") is True:
                committed.append(op)
        elif op.f == "publish" and op.type == "ok" and op.exit == 0:
            acked.append(op)
    if not verifies:
        return out.result({"verified_namespaces": 0, "note": "no claim-verify in this history"})

    git_items = obj(obj(prep.final_durable).get("git")).get("items") or []
    at_commit = {(g.get("ledger_namespace"), g.get("item_id"), g.get("commit")): g.get("revision")
                 for g in map(obj, git_items)}
    listed: dict[str, dict] = {}
    for ns, v in verifies.items():
        if not v.definite or v.exit != 0:
            out.unknown(f"final claim-verify of {ns} did not answer exit 0 ({v.type}, exit {v.exit})")
            continue
        result = v.result()
        for finding in result.get("findings") or []:
            f = obj(finding)
            out.add("claim-verify-finding",
                    f"Namespace {ns}: the final claim-verify reported {f.get('code')!r} for item "
                    f"{f.get('item_id')} after every acknowledged publication was committed; a correct run "
                    "leaves no finding (contract §3 merge-coordinated reconciliation).",
                    v.indices, namespace=ns, finding=f, code=f.get("code"))
        for p in map(obj, result.get("publications") or []):
            if isinstance(p.get("operation_id"), str):
                listed[p["operation_id"]] = dict(p, _verify=v)

    for op in acked:
        ns = op.req.get("ledger_namespace")
        if ns not in verifies or not verifies[ns].definite or verifies[ns].exit != 0:
            continue
        oid = op.req.get("operation_id")
        rev = op.result().get("committed_revision")
        p = listed.get(oid)
        if p is None:
            out.add("acknowledged-publication-unlisted",
                    f"Operation {oid}: publish-claimed answered exit 0 (committed {rev}), but the final "
                    f"claim-verify of {ns} does not list it among its publications.",
                    [*op.indices, *verifies[ns].indices], operation_id=oid, namespace=ns)
        elif p.get("committed_revision") != rev:
            out.add("publication-revision-differs",
                    f"Operation {oid}: acknowledged with committed_revision {rev}, listed by claim-verify with "
                    f"{p.get('committed_revision')}.", [*op.indices, *p["_verify"].indices], operation_id=oid)

    for c in committed:
        oid = c.req.get("operation_id")
        p = listed.get(oid)
        v = verifies.get(c.req.get("ledger_namespace"))
        if p is None or v is None:
            continue
        if p.get("git_finalized") is not True:
            out.add("publication-not-finalized",
                    f"Operation {oid}: its agent committed exactly its bytes ({c.req.get('committed_revision')}) "
                    f"in {c.result().get('git_commit')}, yet the final claim-verify reports git_finalized "
                    f"{p.get('git_finalized')!r}.", [*c.indices, *v.indices], operation_id=oid)
            continue
        key = (c.req.get("ledger_namespace"), c.req.get("item_id"), p.get("git_commit"))
        if key in at_commit and at_commit[key] != c.req.get("committed_revision"):
            out.add("finalized-bytes-differ",
                    f"Operation {oid}: claim-verify finalized it at commit {p.get('git_commit')}, but that commit "
                    f"holds revision {at_commit[key]} of the item, not {c.req.get('committed_revision')}.",
                    [*c.indices, *v.indices], operation_id=oid, commit=p.get("git_commit"))
    return out.result({"verified_namespaces": len(verifies), "acknowledged": len(acked), "committed": len(committed)})
