"""``claim-verify``: reconcile the journal with the working tree and Git.

Under the namespace lock (one write transaction): replay the journal, resolve
pending intents from the exact item bytes (``pending-intent-resolved``, clean;
unresolvable ones are ``publication-outcome-unknown``), persist the floor,
check each item's working-tree bytes against its publications
(``stale-write-detected``, ``revision-regression``), look every successful
publication up in the history reachable from ``HEAD`` and append ONE
``publish-finalization`` per publication found (idempotent: a finalized
publication is never finalized again), check ``HEAD`` did not go back to an
older published revision (``revision-regression``). Then append a line to
the derived reconcile log ``<journal dir>/reconcile.jsonl`` (outside the
journal, not authority) and build the reply with the contract's builders.
"""

from __future__ import annotations

import json
import os

from backends.api import Clock, CommitOutcomeUnknown, FloorPersistFailed, StoreUnavailable
from backends.contract.records import Reply
from backends.contract import Code, error, format_instant, revision, success
from backends.gitjournal import gitrepo
from backends.contract import verify as vs
from backends.gitjournal.fsio import read_or_none
from backends.gitjournal.journal import JournalWriteFailed
from backends.gitjournal.store import GitJournalStore

RECONCILE_LOG = "reconcile.jsonl"


def _publications(state) -> list[dict]:
    """Successful terminal outcomes in journal order."""
    pubs = []
    for (op, item), final in state.finals.items():
        if final["exit"] != 0:
            continue
        rev = final.get("committed_revision") or final["envelope"]["result"]["committed_revision"]
        pubs.append({"op": op, "item": item, "rev": rev, "path": final.get("path"), "relpath": final.get("relpath")})
    return pubs


def verify(store: GitJournalStore, clock: Clock) -> Reply:
    ns = store.ns
    try:
        with store.transaction(write=True) as txn:
            findings = [{"finding": vs.PENDING_INTENT_RESOLVED, "operation_id": e["op"], "item_id": e["item"],
                         "resolution": "committed" if e["t"] == "publish-final" else "not-applied"}
                        for e in txn.reconciled]
            floor = txn.get_floor(ns)
            now = clock.now_ms() if floor is None else max(clock.now_ms(), floor)
            txn.set_floor(ns, now)
            for (op, item), intent in txn.state.pending.items():
                data = read_or_none(intent["path"])
                findings.append({"finding": vs.PUBLICATION_OUTCOME_UNKNOWN, "operation_id": op, "item_id": item,
                                 "expected_revision": intent["candidate_revision"],
                                 "previous_revision": intent["old_revision"],
                                 "actual_revision": revision(data) if data is not None else None})
            pubs = _publications(txn.state)
            findings += _working_tree_findings(store, pubs)
            publications, head_findings, new_entries = _git_findings(store, txn.state, pubs)
            findings += head_findings
            txn.append(new_entries)
    except StoreUnavailable as e:
        return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.CLAIM_STORE_UNAVAILABLE, {"reason": e.reason})
    except JournalWriteFailed:
        return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.CLAIM_STORE_UNAVAILABLE,
                     {"reason": "journal-write-failed"})
    except (FloorPersistFailed, CommitOutcomeUnknown):
        return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.CLOCK_FLOOR_PERSISTENCE_FAILED,
                     {"ledger_namespace": ns})
    result = {"ledger_namespace": ns, "observed_at": format_instant(now), "findings": findings,
              "publications": publications}
    _log(store, result)
    if any(f["finding"] in vs.BAD_FINDINGS for f in findings):
        return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.PUBLICATION_OUTCOME_UNKNOWN, result)
    return success(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, result)


def _is_local(store: GitJournalStore, pub: dict) -> bool:
    return pub["path"] is None or pub["path"] == store.ledger.item_path(pub["item"])


def _working_tree_findings(store: GitJournalStore, pubs: list[dict]) -> list[dict]:
    """Per item published from this worktree: its bytes must be the latest
    local revision or a later publication's (merged from elsewhere)."""
    findings = []
    for item in dict.fromkeys(p["item"] for p in pubs):
        item_pubs = [p for p in pubs if p["item"] == item]
        local = [i for i, p in enumerate(item_pubs) if _is_local(store, p)]
        if not local:
            continue
        last = local[-1]
        data = read_or_none(store.ledger.item_path(item))
        actual = revision(data) if data is not None else None
        revs = [p["rev"] for p in item_pubs]
        if actual in revs[last:]:
            continue
        kind = vs.REVISION_REGRESSION if actual in revs[:last] else vs.STALE_WRITE_DETECTED
        findings.append({"finding": kind, "item_id": item, "where": "working-tree",
                         "expected_revision": revs[last], "actual_revision": actual})
    return findings


def _git_findings(store: GitJournalStore, state, pubs: list[dict]):
    """``result.publications``, HEAD regression findings, and the new
    ``publish-finalization`` entries."""
    top = store.ledger.top
    history: dict[str, list[tuple[str, str]]] = {}
    publications, entries, findings = [], [], []
    newest_final: dict[str, int] = {}
    for i, p in enumerate(pubs):
        relpath = p["relpath"] or store.ledger.relpath(p["item"])
        if relpath not in history:
            history[relpath] = gitrepo.revisions_in_history(top, relpath)
        done = state.finalized.get((p["op"], p["item"]))
        commit = done["git_commit"] if done else None
        if commit is None:
            matches = [c for c, rev in history[relpath] if rev == p["rev"]]
            if matches:
                commit = matches[-1]  # the oldest commit carrying this revision
                entries.append({"t": "publish-finalization", "op": p["op"], "item": p["item"],
                                "committed_revision": p["rev"], "git_commit": commit})
        if commit is not None:
            newest_final[p["item"]] = i
        publications.append({"operation_id": p["op"], "item_id": p["item"], "committed_revision": p["rev"],
                             "git_finalized": commit is not None, "git_commit": commit})
    for item, idx in newest_final.items():
        item_pubs = [(i, p) for i, p in enumerate(pubs) if p["item"] == item]
        relpath = item_pubs[0][1]["relpath"] or store.ledger.relpath(item)
        if not history.get(relpath):
            continue
        head_rev = history[relpath][0][1]
        later = [i for i, p in item_pubs if p["rev"] == head_rev]
        if later and max(later) < idx:
            findings.append({"finding": vs.REVISION_REGRESSION, "item_id": item, "where": "HEAD",
                             "expected_revision": pubs[idx]["rev"], "actual_revision": head_rev})
    return publications, findings, entries


def _log(store: GitJournalStore, result: dict) -> None:
    line = json.dumps({"worktree": store.ledger.top, "head": gitrepo.head(store.ledger.top), **result},
                      sort_keys=True)
    with open(os.path.join(store.ledger.ns_dir, RECONCILE_LOG), "a") as f:
        f.write(line + "\n")
