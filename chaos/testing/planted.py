"""Backends with a planted fencing bug: the suite must catch them.

Each is the real SQLite backend (real file, real transactions) with exactly
one rule of the contract removed, plugged in through the registry's
``"python"`` entry, so worker processes load it by module path::

    {"backend": "python", "factory": "chaos.testing.planted:open_takeover", "path": ".../claims.db", ...}

* ``open_takeover``: ``acquire`` ignores a live lease (no ``claim-held``
  check): a second owner takes an item over while the first one's lease is
  still live, so two owners hold it at once (the dual-ownership and lease
  checkers must say ``invalid``).
* ``open_unfenced``: ``publish-claimed`` skips the epoch and expiry parts of
  the fence: a stale writer's publish commits.

They live in the package (not under ``tests/``) so that ``python -m
chaos.host`` workers can import them without any ``PYTHONPATH`` set up.
"""

from __future__ import annotations

from backends.api import Active, Backend, ClaimRecord, Clock, EPOCH_MAX, Hooks
from backends.contract import AcquireRequest, Code, claim_error, claim_json, claim_success, read_back
from backends.engine import fence_rejection
from backends.sqlite import SqliteBackend



class TakeoverBackend(SqliteBackend):
    """SQLite backend whose acquire forgets to refuse a live lease (the planted bug)."""

    def _acquire(self, op: str, req: AcquireRequest):
        def decide(rec: ClaimRecord, now: int):
            if rec.last_epoch != req.expected_last_epoch or rec.active != req.expected_active:
                return claim_error("acquire", Code.CLAIM_CONFLICT, read_back(rec, now)), None
            # PLANTED BUG: the `claim-held` refusal for a live lease is missing here.
            if rec.last_epoch >= EPOCH_MAX:
                return claim_error("acquire", Code.EPOCH_EXHAUSTED, read_back(rec, now)), None
            epoch = rec.last_epoch + 1
            active = Active(req.owner_id, epoch, now, now + req.lease_duration_ms)
            new = ClaimRecord(rec.ledger_namespace, rec.item_id, epoch, active)
            return claim_success("acquire", {"claim": claim_json(active), "read_back": read_back(new, now)}), new
        return self._decide(op, req, decide)


def _lenient_fence(req, rec, now):
    """The fence without its epoch and expiry dimensions (the planted bug)."""
    reason = fence_rejection(req, rec, now)
    return None if reason in ("epoch-mismatch", "claim-expired", "owner-mismatch") else reason


class UnfencedBackend(SqliteBackend):
    """SQLite backend whose publish fence ignores owner, epoch and expiry."""

    def _fence(self, req, rec, now):
        return _lenient_fence(req, rec, now)


def open_takeover(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    return TakeoverBackend(spec, clock, hooks)


def open_unfenced(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    return UnfencedBackend(spec, clock, hooks)
