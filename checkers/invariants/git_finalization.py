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
2. its ``findings`` are empty (each one is a ``claim-verify-finding``), but
   for ``pending-intent-resolved`` of a publication whose last attempt ended
   in doubt (``info``: killed, lost, answered unknown): an intent its client
   never heard the end of is exactly what the verify is there to reconcile
   (a Wowbagger run's last publish answered ``publication-outcome-unknown``
   and was resolved ``unchanged`` by the final verify: no defect);
3. every acknowledged publication (exit 0) is listed in its ``publications``
   with the committed revision it was acknowledged with;
4. every publication whose own commit put its candidate into ``HEAD`` and
   that a ``claim-verify`` then saw there is ``git_finalized``, and the commit
   it names holds exactly those bytes (the final-state ``git.items`` history,
   read with plain ``git``). "Saw there": a verify of its namespace that
   answered exit 0, invoked after the commit ended, with no other commit that
   may have moved the item's ``HEAD`` bytes in between (§6: "When ``HEAD``
   contains the committed revision, it appends one ... ``publish-finalization``").
   The contract asks the finalization of ``claim-verify`` only; a program may
   also finalize on its next publish (the shipped Wowbagger release does), but
   a publication whose bytes ``HEAD`` lost before any verify ran may stay
   unfinalized (its agent runs ``claim-verify`` right after each commit,
   ``workloads.claims``, yet a rival's commit can come first).

A history without ``verify`` ops (no Git-backed ledger) passes vacuously: this
checker says so in its stats.
"""

from __future__ import annotations

from ._common import Findings, obj, prepare


def _result(rec) -> dict:
    return obj(obj(obj(obj(rec).get("value")).get("envelope")).get("result"))


def check(history, ctx: dict | None = None) -> dict:
    h = prepare(history)
    out = Findings()
    verify_ops = [op for op in h.ops if op.f == "verify"]
    if not verify_ops:
        return out.result({"verified_namespaces": 0, "note": "no claim-verify in this history"})
    commit_ops = [op for op in h.ops if op.f == "commit" and op.type == "ok"]
    acked = [op for op in h.ops if op.f == "publish" and op.type == "ok" and op.exit == 0]
    last_attempt: dict = {}
    for op in h.ops:
        if op.f == "publish" and op.oid is not None:
            last_attempt[op.oid] = op   # invoke order: the last one wins
    in_doubt = {oid for oid, op in last_attempt.items() if op.type == "info"}
    reconciled = 0
    # the few ops whose requests and replies this checker reads in full
    raw = h.raw([i for op in h.ops if op.f in ("verify", "commit") for i in op.indices])
    verifies: dict[str, object] = {}
    for op in verify_ops:
        ns = obj(obj(raw.get(op.i)).get("value")).get("ledger_namespace")
        if isinstance(ns, str):
            verifies[ns] = op   # the last one wins (invoke order)
    committed = []             # (op, request) of commits that put a publication's bytes into HEAD
    for op in commit_ops:
        req = obj(obj(raw.get(op.i)).get("value"))
        res = _result(raw.get(op.c))
        # exactly its bytes: a commit made while the program wrote a later publication over the file holds
        # those (the harness's replies before it said so answered committed with the other head_revision)
        if not req.get("all") and res.get("committed") is True and res.get("head_revision") in (
                None, req.get("committed_revision")):
            committed.append((op, req))
    movers = _head_movers(h, raw)
    at_commit = h.final.git_items if h.final is not None else {}
    unseen = 0

    listed: dict[str, dict] = {}
    for ns, v in verifies.items():
        if not v.definite or v.exit != 0:
            out.unknown(f"final claim-verify of {ns} did not answer exit 0 ({v.type}, exit {v.exit})")
            continue
        result = _result(raw.get(v.c))
        for finding in result.get("findings") or []:
            f = obj(finding)
            if f.get("code") == "pending-intent-resolved" and f.get("operation_id") in in_doubt:
                reconciled += 1
                continue
            out.add("claim-verify-finding",
                    f"Namespace {ns}: the final claim-verify reported {f.get('code')!r} for item "
                    f"{f.get('item_id')} after every acknowledged publication was committed; a correct run "
                    "leaves no finding (contract §3 merge-coordinated reconciliation).",
                    v.indices, namespace=ns, finding=f, code=f.get("code"))
        for p in map(obj, result.get("publications") or []):
            if isinstance(p.get("operation_id"), str):
                listed[p["operation_id"]] = dict(p, _verify=v)

    def verified(ns) -> bool:
        v = verifies.get(ns)
        return v is not None and v.definite and v.exit == 0

    for op in acked:
        ns = op.key[0] if op.key else None
        if not verified(ns):
            continue
        p = listed.get(op.oid)
        if p is None:
            out.add("acknowledged-publication-unlisted",
                    f"Operation {op.oid}: publish-claimed answered exit 0 (committed {op.committed}), but the final "
                    f"claim-verify of {ns} does not list it among its publications.",
                    [*op.indices, *verifies[ns].indices], operation_id=op.oid, namespace=ns)
        elif p.get("committed_revision") != op.committed:
            out.add("publication-revision-differs",
                    f"Operation {op.oid}: acknowledged with committed_revision {op.committed}, listed by "
                    f"claim-verify with {p.get('committed_revision')}.", [*op.indices, *p["_verify"].indices],
                    operation_id=op.oid)

    for c, req in committed:
        oid, ns = req.get("operation_id"), req.get("ledger_namespace")
        p = listed.get(oid)
        if p is None or not verified(ns):
            continue
        v = verifies[ns]
        if p.get("git_finalized") is not True:
            saw = _verify_that_saw(c, (ns, req.get("item_id")), verify_ops, raw, movers)
            if saw is None:
                unseen += 1     # HEAD moved on before any claim-verify: finalizing it is not owed
                continue
            out.add("publication-not-finalized",
                    f"Operation {oid}: its agent committed exactly its bytes ({req.get('committed_revision')}) and "
                    f"a claim-verify of {ns} then ran with those bytes still in HEAD (no other commit of the item "
                    f"in between), yet the final claim-verify reports git_finalized {p.get('git_finalized')!r} "
                    "(contract §6: claim-verify finalizes a publication whose revision HEAD contains).",
                    [*c.indices, *saw.indices, *v.indices], operation_id=oid)
            continue
        key = (ns, req.get("item_id"), p.get("git_commit"))
        if key in at_commit and at_commit[key] != req.get("committed_revision"):
            out.add("finalized-bytes-differ",
                    f"Operation {oid}: claim-verify finalized it at commit {p.get('git_commit')}, but that commit "
                    f"holds revision {at_commit[key]} of the item, not {req.get('committed_revision')}.",
                    [*c.indices, *v.indices], operation_id=oid, commit=p.get("git_commit"))
    return out.result({"verified_namespaces": len(verifies), "acknowledged": len(acked), "committed": len(committed),
                       "in_doubt_intents_reconciled": reconciled, "head_moved_before_verify": unseen})


def _head_movers(h, raw) -> dict:
    """``(namespace, item_id)`` -> the commit ops that may have changed the
    item's bytes in ``HEAD``: a commit of the item that did not answer "nothing
    committed" or "already there", and every final sweep listing it."""
    out: dict = {}
    for op in h.ops:
        if op.f != "commit":
            continue
        req = obj(obj(raw.get(op.i)).get("value")) if op.i in raw else {}
        res = _result(raw.get(op.c)) if op.type == "ok" else {}
        if op.type == "ok" and ((res.get("committed") is False and not res.get("git_commit")) or res.get("already")):
            continue   # nothing committed (a superseded commit that made one still moved HEAD)
        ns = req.get("ledger_namespace")
        items = (req.get("item_ids") or []) if req.get("all") else [req.get("item_id")]
        for item in items:
            out.setdefault((ns, item), []).append(op)
    return out


def _verify_that_saw(commit, key, verify_ops, raw, movers):
    """The first exit-0 claim-verify of ``key``'s namespace invoked after
    ``commit`` ended, with no other commit of the item that may have moved
    ``HEAD`` between the two; None when there is none."""
    others = [m for m in movers.get(key, ()) if m is not commit and not m.precedes(commit)]
    for v in verify_ops:
        if not (v.definite and v.exit == 0 and commit.precedes(v)):
            continue
        if obj(obj(raw.get(v.i)).get("value")).get("ledger_namespace") != key[0]:
            continue
        if not any(not v.precedes(m) for m in others):  # HEAD could not have moved before v read it
            return v
    return None
