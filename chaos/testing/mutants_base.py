"""Plumbing shared by the mutant backends of ``chaos.testing.mutants``.

* ``TxnView`` / ``StoreView``: a store whose transactions a mutant can
  intercept method by method (everything else is the real ``SqliteStore``:
  real file, ``BEGIN IMMEDIATE``, fsync), so a bug lives in one small
  override instead of a fork of the store.

Mutants that weaken the publish fence override ``Engine._fence``; every
envelope still comes from ``backends.contract``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from backends.api import Txn


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
