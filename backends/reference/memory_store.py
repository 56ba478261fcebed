"""An in-memory ``Store``: the durable coordinator of the no-I/O oracle.

One re-entrant lock serializes every transaction (read or write), which is
exactly the "one serialized decision boundary" the contract asks of a fenced
coordinator. A transaction buffers its writes and applies them only when the
``with`` block exits normally, so an exception anywhere inside leaves the
durable state untouched.

"Durable" here means: survives ``reopen()`` (the engine's restart). Only
process memory of the engine is dropped on restart; these dicts are the
coordinator.

Faults (``store.faults``, names as in vectors.md §6):

* ``clock_floor_persist`` (sticky): every ``set_floor`` raises
  ``FloorPersistFailed``; the transaction rolls back.
* ``publication-outcome-unknown`` (one-shot): the commit of the next write
  transaction that stores a publication outcome raises
  ``CommitOutcomeUnknown`` with nothing applied, and the fault is marked
  ``False``.
"""

from __future__ import annotations

import copy
import threading

from backends.api import CommitOutcomeUnknown, FloorPersistFailed, StoredOutcome
from backends.contract.records import Active, ClaimRecord
from backends.contract import (
    claim_record_json, decode_canonical_base64, encode_base64, format_instant, parse_epoch,
    parse_instant, revision,
)

FAULT_FLOOR = "clock_floor_persist"
FAULT_OUTCOME_UNKNOWN = "publication-outcome-unknown"

_MISSING = object()


class MemoryStore:
    """Dicts behind one lock; see the module docstring."""

    def __init__(self, faults: dict | None = None):
        self._lock = threading.RLock()
        self.floors: dict[str, int] = {}
        self.claims: dict[tuple[str, str], ClaimRecord] = {}
        self.ledgers: dict[tuple[str, str], bytes] = {}
        self.outcomes: dict[tuple[str, str, str], StoredOutcome] = {}  # insertion = commit order
        self.faults: dict[str, bool] = dict(faults or {})

    # ------------------------------------------------------------------ Store protocol

    def transaction(self, write: bool) -> "MemoryTxn":
        return MemoryTxn(self, write)

    def close(self) -> None:
        return None

    def reopen(self) -> None:
        """Nothing volatile to drop: every dict here is durable state."""
        return None

    # ------------------------------------------------------------------ seeding and export

    def seed(self, durable: dict) -> None:
        """Load the manifest ``durable`` shape (vectors.md §3.1)."""
        with self._lock:
            for f in durable.get("clock_floors", []):
                self.floors[f["ledger_namespace"]] = parse_instant(f["observed_at"])
            for c in durable.get("claims", []):
                a = c["active"]
                active = None if a is None else Active(a["owner_id"], parse_epoch(a["epoch"]),
                                                       parse_instant(a["issued_at"]),
                                                       parse_instant(a["expires_at"]))
                rec = ClaimRecord(c["ledger_namespace"], c["item_id"], parse_epoch(c["last_epoch"]), active)
                self.claims[(rec.ledger_namespace, rec.item_id)] = rec
            for led in durable.get("ledgers", []):
                data = decode_canonical_base64(led["source_base64"])
                if data is None:
                    raise ValueError("seeded ledger source_base64 is not canonical base64")
                self.ledgers[(led["ledger_namespace"], led["item_id"])] = data
            for o in durable.get("publication_outcomes", []):
                out = StoredOutcome(o["operation_id"], o["ledger_namespace"], o["item_id"],
                                    o["operation_digest"], o["envelope"]["exit"],
                                    copy.deepcopy(o["envelope"]["stdout"]), copy.deepcopy(o.get("request")))
                self.outcomes[(out.operation_id, out.ledger_namespace, out.item_id)] = out

    def export_durable(self) -> dict:
        """The durable projection in the manifest's shape: floors sorted by
        namespace; claims, ledgers and outcomes in insertion (commit) order."""
        with self._lock:
            return {
                "clock_floors": [{"ledger_namespace": ns, "observed_at": format_instant(ms)}
                                 for ns, ms in sorted(self.floors.items())],
                "claims": [claim_record_json(rec) for rec in self.claims.values()],
                "ledgers": [{"ledger_namespace": ns, "item_id": item, "revision": revision(data),
                             "source_base64": encode_base64(data)}
                            for (ns, item), data in self.ledgers.items()],
                "publication_outcomes": [{
                    "operation_id": o.operation_id, "ledger_namespace": o.ledger_namespace,
                    "item_id": o.item_id, "request": copy.deepcopy(o.request),
                    "operation_digest": o.operation_digest,
                    "envelope": {"exit": o.exit, "stdout": copy.deepcopy(o.envelope)},
                } for o in self.outcomes.values()],
            }


class MemoryTxn:
    """One serialized transaction over a ``MemoryStore`` (context manager and
    ``Txn`` at once). Reads see this transaction's own buffered writes."""

    def __init__(self, store: MemoryStore, write: bool):
        self._store = store
        self._write = write
        self._floors: dict[str, int] = {}
        self._claims: dict[tuple[str, str], ClaimRecord] = {}
        self._ledgers: dict[tuple[str, str], bytes] = {}
        self._outcomes: dict[tuple[str, str, str], StoredOutcome] = {}

    def __enter__(self) -> "MemoryTxn":
        self._store._lock.acquire()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None and self._write:
                self._commit()
        finally:
            self._store._lock.release()
        return False

    def _commit(self) -> None:
        s = self._store
        if self._outcomes and s.faults.get(FAULT_OUTCOME_UNKNOWN):
            s.faults[FAULT_OUTCOME_UNKNOWN] = False  # one-shot: fired
            raise CommitOutcomeUnknown("injected: publication outcome unknown (nothing applied)")
        s.floors.update(self._floors)
        s.claims.update(self._claims)
        s.ledgers.update(self._ledgers)
        s.outcomes.update(self._outcomes)

    def _writable(self) -> None:
        if not self._write:
            raise RuntimeError("write inside a read transaction")

    # ------------------------------------------------------------------ Txn protocol

    def get_floor(self, ns: str) -> int | None:
        return self._floors.get(ns, self._store.floors.get(ns))

    def set_floor(self, ns: str, ms: int) -> None:
        self._writable()
        if self._store.faults.get(FAULT_FLOOR):
            raise FloorPersistFailed("injected: clock floor cannot be persisted")
        self._floors[ns] = ms

    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None:
        key = (ns, item_id)
        return self._claims.get(key, self._store.claims.get(key))

    def put_claim(self, rec: ClaimRecord) -> None:
        self._writable()
        self._claims[(rec.ledger_namespace, rec.item_id)] = rec

    def get_ledger(self, ns: str, item_id: str) -> bytes | None:
        key = (ns, item_id)
        return self._ledgers.get(key, self._store.ledgers.get(key))

    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None:
        self._writable()
        self._ledgers[(ns, item_id)] = bytes(data)

    def get_outcome(self, operation_id: str, ns: str, item_id: str) -> StoredOutcome | None:
        key = (operation_id, ns, item_id)
        return self._outcomes.get(key, self._store.outcomes.get(key))

    def put_outcome(self, outcome: StoredOutcome) -> None:
        self._writable()
        self._outcomes[(outcome.operation_id, outcome.ledger_namespace, outcome.item_id)] = outcome
