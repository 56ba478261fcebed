"""A worker-side lease bug that only a partition exposes (``--backend postgres``).

``trust-lease-from-reply``: the PostgreSQL backend (the real engine over the
real ``PostgresStore``) with a lease cache in the worker process. After an ok
acquire or renew it remembers the lease as valid until *the moment the reply
arrived* plus ``lease_duration_ms``, and a publish whose fence matches a
cached lease that is "still valid" skips the fence check against the durable
claim row (the revision is still compared). The bug is measuring the lease
from the reply instead of from the decision: on a quiet network the two
differ by a millisecond, so nothing goes wrong; behind a partition that holds
the renew's reply back for longer than the lease, the worker trusts a lease
that expired while it was cut off, and its publish lands over a rival that
took the item over (a stale write: ``stale_write`` names it)::

    chaos run --backend postgres --factory chaos.testing.lease_mutants:open_trust_lease_from_reply \\
              --nemesis partition --scenario partitioned-renew
"""

from __future__ import annotations

import threading
import time

from backends.api import Clock, Hooks
from backends.postgres import PostgresBackend


class TrustLeaseFromReply(PostgresBackend):
    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self._leases: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def _remember(self, req, reply) -> None:
        if reply.exit != 0:
            return
        claim = (reply.envelope.get("result") or {}).get("claim") or {}
        key = (req.ledger_namespace, req.item_id, claim.get("owner_id"), str(claim.get("epoch")))
        with self._lock:
            self._forget(req.ledger_namespace, req.item_id)   # one lease per item: the newest grant
            self._leases[key] = time.monotonic() + req.lease_duration_ms / 1000  # BUG: from the reply's arrival

    def _forget(self, ns: str, item: str) -> None:
        for k in [k for k in self._leases if k[:2] == (ns, item)]:
            del self._leases[k]

    def _acquire(self, op, req):
        reply = super()._acquire(op, req)
        self._remember(req, reply)
        return reply

    def _renew_or_release(self, op, req):
        reply = super()._renew_or_release(op, req)
        if op == "renew":
            self._remember(req, reply)
        elif reply.exit == 0:   # released: nothing is trusted any more
            with self._lock:
                self._forget(req.ledger_namespace, req.item_id)
        return reply

    def _fence(self, req, rec, now):
        key = (req.fence_namespace, req.fence_item_id, req.fence_owner_id, str(req.fence_epoch))
        with self._lock:
            until = self._leases.get(key)
        if until is not None and time.monotonic() < until:
            return None          # BUG: "my lease is still good", the durable claim row is not consulted
        return super()._fence(req, rec, now)

    def restart(self) -> None:
        super().restart()
        with self._lock:
            self._leases.clear()


def open_trust_lease_from_reply(spec, clock, hooks):
    return TrustLeaseFromReply(spec, clock, hooks)
