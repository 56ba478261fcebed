"""``Store`` / ``Txn`` of the Git-journal backend (merge-coordinated profile).

A write transaction = holding the namespace journal lock. On entry, under the
lock: cut a torn journal tail, replay the journal, reconcile prior pending
intents against the exact item bytes, remove temp files of dead writers.
``set_floor`` persists the floor at once (its own append + fsync), so the
floor is durable before any decision. On exit the buffered decision is
appended with fsync; a publication is ordered per contract §6:

    publish-intent (fsync)  ->  item bytes (tmp + fsync + rename + fsync dir)
                            ->  publish-final (fsync)

A read transaction replays the journal without the lock and persists nothing.
A read that would answer from a pending intent (a publication read of that
operation, a publish's validation of that item) first calls ``settle``: when
such an intent is pending it takes the lock and reconciles (contract §6: a
merge-coordinated backend reconciles prior intents under the lock before it
checks idempotency and revision), so a caller that lost a reply never reads
"not found" for a publication whose bytes are in place.

Failures: the floor append failing (its bytes truncated away) ->
``FloorPersistFailed``; any later append or the item write failing ->
``CommitOutcomeUnknown`` (a pending intent is reconciled by the next locked
operation or ``claim-verify``). A busy lock -> ``StoreUnavailable
("claim-store-locked")``.

Crash points (test hook, never set in production): when the environment
variable ``CLAIM_CHAOS_GITJOURNAL_CRASH_AT`` names a step (``after-lock``,
``after-floor``, ``after-intent``, ``after-item-tmp``, ``after-item-rename``,
``after-final``) the process SIGKILLs itself there: a real kill -9 at an exact
moment, for the crash tests.
"""

from __future__ import annotations

import copy
import os
import signal
import threading

from backends.api import CommitOutcomeUnknown, FloorPersistFailed, StoredOutcome, StoreUnavailable
from backends.contract.records import ClaimRecord
from backends.contract import revision
from backends.gitjournal import journal as jr
from backends.gitjournal.fsio import fsync_dir, read_or_none, remove_stale_tmp, write_tmp
from backends.gitjournal.ledger import Ledger
from backends.gitjournal.lock import DEFAULT_WAIT_S, NamespaceLock

CRASH_ENV = "CLAIM_CHAOS_GITJOURNAL_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class GitJournalStore:
    """Durable storage of one provisioned ledger (one namespace)."""

    def __init__(self, ledger: Ledger, lock_wait_s: float = DEFAULT_WAIT_S):
        self.ledger = ledger
        self.ns = ledger.namespace
        self.lock_wait_s = lock_wait_s
        self.faults: dict[str, bool] = {}  # the host reads it; faults here are real mechanisms
        self._threads = threading.Lock()   # threads of this process queue here first
        jr.init_journal(ledger.ns_dir)

    def transaction(self, write: bool) -> "GitJournalTxn":
        return GitJournalTxn(self, write)

    def close(self) -> None:
        return None

    def reopen(self) -> None:
        return None  # no process state: every transaction replays the journal (``jr.replay``: its fold is checked)

    def replay(self) -> jr.JournalState:
        return jr.replay(self.ledger.journal, self.ns)

    def settle(self, concerns) -> set[tuple[str, str]]:
        """Reconcile pending intents under the lock when one of them
        ``concerns((op, item))``; returns the keys still pending that concern
        the caller (intents whose item bytes are neither the old nor the
        candidate revision: only ``claim-verify`` can report those). Without
        such an intent nothing is locked or written."""
        if not any(concerns(key) for key in self.replay().pending):
            return set()
        with self.transaction(write=True) as txn:
            return {key for key in txn.state.pending if concerns(key)}

    # ------------------------------------------------------------------ scaffolding

    def seed(self, durable: dict) -> None:
        """Privileged setup (never a write path): this namespace's part of a
        manifest ``durable`` object, written under the lock."""
        from backends.gitjournal.projection import seed_entries

        with self.transaction(write=True) as txn:
            entries, items = seed_entries(self.ns, durable)
            for item_id, data in items.items():
                txn.write_item(item_id, data)
            txn.append(entries)

    def export_durable(self) -> dict:
        from backends.gitjournal.projection import export

        return export(self)


class GitJournalTxn:
    def __init__(self, store: GitJournalStore, write: bool):
        self.store = store
        self.ledger = store.ledger
        self.write = write
        self.state: jr.JournalState | None = None
        self.lock: NamespaceLock | None = None
        self._holding = False
        self._claims: dict[str, ClaimRecord] = {}
        self._ledgers: dict[str, bytes] = {}
        self._outcomes: dict[tuple[str, str], StoredOutcome] = {}
        self.reconciled: list[dict] = []  # terminal entries appended for prior intents

    # ------------------------------------------------------------------ boundary

    def __enter__(self) -> "GitJournalTxn":
        if not self.write:
            self.state = self.store.replay()
            return self
        self.store._threads.acquire()
        self._holding = True
        try:
            self.lock = NamespaceLock(self.ledger.ns_dir, self.store.lock_wait_s)
            self.lock.acquire()
            crash_point("after-lock")
            self.state = self.store.replay()
            jr.repair_torn_tail(self.ledger.journal, self.state)
            remove_stale_tmp(self.ledger.path)
            self.reconcile_intents()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None and self.write:
                self._commit()
        finally:
            self._release()
        return False

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if self._holding:
            self._holding = False
            self.store._threads.release()

    # ------------------------------------------------------------------ journal writes

    def append(self, entries: list[dict]) -> None:
        if not entries:
            return
        self.state.size = jr.append(self.ledger.journal, entries)
        for e in entries:
            jr.apply(self.state, self.store.ns, e)

    def write_item(self, item_id: str, data: bytes) -> None:
        """Replace the item's bytes atomically and durably."""
        tmp = write_tmp(self.ledger.path, item_id, data)
        crash_point("after-item-tmp")
        try:
            os.replace(tmp, self.ledger.item_path(item_id))
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        crash_point("after-item-rename")
        fsync_dir(self.ledger.path)

    def reconcile_intents(self) -> None:
        """Resolve pending intents from the exact bytes at the intent's path:
        candidate bytes -> the publication happened (append its final, once
        the rename the dead writer may not have synced is durable);
        the old bytes -> it did not (append ``publish-not-applied``, so a retry
        re-executes). Anything else stays pending for ``claim-verify``."""
        for (op, item), intent in list(self.state.pending.items()):
            data = read_or_none(intent["path"])
            current = revision(data) if data is not None else None
            if current == intent["candidate_revision"]:
                fsync_dir(os.path.dirname(intent["path"]))
                entry = final_entry(intent)
            elif current == intent["old_revision"]:
                entry = {"t": "publish-not-applied", "op": op, "item": item, "reason": "item-bytes-unchanged"}
            else:
                continue
            self.append([entry])
            self.reconciled.append(entry)

    # ------------------------------------------------------------------ Txn protocol

    def _check(self, ns: str) -> None:
        if ns != self.store.ns:
            raise StoreUnavailable("ledger-namespace-not-bound-here", f"{ns} is not this ledger's namespace")

    def get_floor(self, ns: str) -> int | None:
        self._check(ns)
        return self.state.floor

    def set_floor(self, ns: str, ms: int) -> None:
        """Persist the floor now (contract §6: before any decision)."""
        self._check(ns)
        if not self.write:
            raise RuntimeError("floor write inside a read transaction")
        if self.state.floor is not None and ms <= self.state.floor:
            return  # already durable
        try:
            self.append([{"t": "floor", "ms": ms}])
        except jr.JournalWriteFailed as e:
            if e.rolled_back:
                raise FloorPersistFailed(str(e)) from e
            raise CommitOutcomeUnknown(str(e)) from e
        crash_point("after-floor")

    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None:
        self._check(ns)
        return self._claims.get(item_id, self.state.claims.get(item_id))

    def put_claim(self, rec: ClaimRecord) -> None:
        self._check(rec.ledger_namespace)
        self._claims[rec.item_id] = rec

    def get_ledger(self, ns: str, item_id: str) -> bytes | None:
        self._check(ns)
        if item_id in self._ledgers:
            return self._ledgers[item_id]
        return read_or_none(self.ledger.item_path(item_id))

    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None:
        self._check(ns)
        self._ledgers[item_id] = bytes(data)

    def get_outcome(self, operation_id: str, ns: str, item_id: str) -> StoredOutcome | None:
        self._check(ns)
        key = (operation_id, item_id)
        return self._outcomes.get(key, self.state.outcomes.get(key))

    def put_outcome(self, outcome: StoredOutcome) -> None:
        self._check(outcome.ledger_namespace)
        self._outcomes[(outcome.operation_id, outcome.item_id)] = outcome

    # ------------------------------------------------------------------ commit

    def _commit(self) -> None:
        try:
            self.append([jr.claim_entry(rec) for rec in self._claims.values()])
            for (op, item), outcome in self._outcomes.items():
                if outcome.exit == 0 and item in self._ledgers:
                    self._publish(outcome, self._ledgers.pop(item))
                else:
                    self.append([self._final(outcome, None)])
                    crash_point("after-final")
        except (jr.JournalWriteFailed, OSError) as e:
            raise CommitOutcomeUnknown(str(e)) from e
        if self._ledgers:
            raise RuntimeError("ledger bytes buffered without a publication outcome")

    def _final(self, outcome: StoredOutcome, committed: str | None) -> dict:
        return {"t": "publish-final", "op": outcome.operation_id, "item": outcome.item_id,
                "digest": outcome.operation_digest, "exit": outcome.exit,
                "envelope": copy.deepcopy(outcome.envelope), "request": copy.deepcopy(outcome.request),
                "committed_revision": committed, "path": self.ledger.item_path(outcome.item_id),
                "relpath": self.ledger.relpath(outcome.item_id)}

    def _publish(self, outcome: StoredOutcome, data: bytes) -> None:
        old = read_or_none(self.ledger.item_path(outcome.item_id))
        intent = dict(self._final(outcome, revision(data)), t="publish-intent",
                      old_revision=revision(old) if old is not None else None,
                      candidate_revision=revision(data))
        self.append([intent])
        crash_point("after-intent")
        self.write_item(outcome.item_id, data)
        self.append([final_entry(intent)])
        crash_point("after-final")


def final_entry(intent: dict) -> dict:
    """The terminal success entry of a committed intent."""
    keep = ("op", "item", "digest", "exit", "envelope", "request", "committed_revision", "path", "relpath")
    return {"t": "publish-final", **{k: copy.deepcopy(intent[k]) for k in keep}}
