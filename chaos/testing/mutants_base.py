"""Plumbing shared by the mutant backends of ``chaos.testing.mutants``.

* ``TxnView`` / ``StoreView``: a store whose transactions a mutant can
  intercept method by method (everything else is the real ``SqliteStore``:
  real file, ``BEGIN IMMEDIATE``, fsync), so a bug lives in one small
  override instead of a fork of the store.
* ``commit_publication``: the engine's publish steps 6-9 (floor, fence,
  revision, write) with the fence function and the floor policy as
  parameters. The engine looks its ``fence_rejection`` up as a module global,
  and swapping a global is not safe in a host that serves calls in threads,
  so the mutants that weaken the fence run this copy instead. Every envelope
  still comes from ``backends.contract``.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Callable, Iterator

from backends.api import ClaimRecord, Reply, Txn
from backends.contract import (
    Code, PublishRequest, empty_record, format_epoch, format_instant, publication_error, publication_success,
    read_back, revision,
)

Fence = Callable[[PublishRequest, ClaimRecord, int], "str | None"]


class TxnView:
    """Delegates every ``Txn`` method to the real transaction; subclasses
    override the ones their bug changes."""

    def __init__(self, inner: Txn, owner):
        self.inner = inner
        self.owner = owner   # the mutant backend (for process-memory state)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class StoreView:
    """A ``Store`` whose transactions are wrapped in ``txn_view(inner, owner)``."""

    def __init__(self, inner, owner, txn_view: type[TxnView]):
        self.inner = inner
        self.owner = owner
        self.txn_view = txn_view

    @contextmanager
    def transaction(self, write: bool) -> Iterator[TxnView]:
        with self.inner.transaction(write) as txn:
            yield self.txn_view(txn, self.owner)

    def __getattr__(self, name):   # seed, export_durable, reopen, close, path ...
        return getattr(self.inner, name)


def commit_publication(engine, txn: Txn, req: PublishRequest, candidate: bytes, fence: Fence,
                       persist_floor_on_reject: bool = True) -> Reply:
    """Steps 6-9 of ``Engine._commit_publication`` with a pluggable fence and
    floor policy (the correct engine: ``fence_rejection``, ``True``)."""
    ns, item = req.ledger_namespace, req.item_id
    now = engine._effective(txn, ns)
    if persist_floor_on_reject:
        txn.set_floor(ns, now)
    rec = txn.get_claim(ns, item) or empty_record(ns, item)
    reason = fence(req, rec, now)
    if reason is not None:
        return publication_error(Code.CLAIM_FENCE_REJECTED, {
            "ledger_namespace": ns,
            "item_id": item,
            "observed_at": format_instant(now),
            "reason": reason,
            "supplied_owner_id": req.fence_owner_id,
            "supplied_epoch": format_epoch(req.fence_epoch),
            "active_owner_id": rec.active.owner_id if rec.active is not None else None,
            "active_epoch": format_epoch(rec.active.epoch) if rec.active is not None else None,
        }, operation_id=req.operation_id)
    current = txn.get_ledger(ns, item)
    actual = revision(current) if current is not None else None
    if actual != req.expected_revision:
        return engine._revision_conflict(req, actual)
    if not persist_floor_on_reject:
        txn.set_floor(ns, now)
    txn.put_ledger(ns, item, candidate)
    return publication_success(req.operation_id, {
        "ledger_namespace": ns,
        "item_id": item,
        "committed_revision": revision(candidate),
        "claim_fence": copy.deepcopy(req.raw["claim_fence"]),
        "claim_read_back": read_back(rec, now),
    })
