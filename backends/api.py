"""The small protocols every backend speaks.

Read this file first. It is the seam between the parts of the suite:

* ``Reply`` (``backends.contract.records``, the contract's own value type) is
  what every public operation returns: the contract's exit code and the parsed
  JSON envelope (what a CLI would print on stdout).
* ``Backend`` is the client-facing protocol (Jepsen's Client): one method per
  public operation, each taking the *raw request bytes* or a dict, so strict
  parsing (duplicate members, NaN, UTF-8) is always exercised.
* ``Store`` / ``Txn`` is the storage-facing protocol. The decision logic of the
  contract (precedence, floors, fences, idempotency, envelopes) is written once
  in ``backends.engine`` over a ``Store``; each real backend only supplies the
  durable storage and its serialized transaction. That is how "one canonical
  contract" holds: no backend formats an envelope or picks a code itself.
* ``Clock`` is the backend's own physical clock. The harness can set it
  (conformance vectors pin it per action; nemeses skew it).
* ``Hooks`` lets a harness pause a real call between validation and the
  commit transaction (the paused-writer barrier) or kill it right after the
  commit (response loss).

Internally epochs are ``int`` (0 .. 2**64-1) and instants are ``int``
milliseconds since the Unix epoch; the contract module converts to the wire
forms (decimal strings, ``YYYY-MM-DDTHH:MM:SS.mmmZ``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Iterator, Protocol, runtime_checkable

from backends.contract.records import Active, BackendConfig, ClaimRecord, Reply
from backends.contract.values import EPOCH_MAX

__all__ = ["EPOCH_MAX", "OPERATIONS", "Active", "Backend", "BackendConfig", "ClaimRecord", "Clock",
           "CommitOutcomeUnknown", "ContextManagerTxn", "FileClock", "FixedClock", "FloorPersistFailed", "Hooks",
           "ReplyLost", "Reply", "Restartable", "Store", "StoreError", "StoreUnavailable", "StoredOutcome",
           "SystemClock", "Txn", "iter_ops"]

#: The operations of the public surface, by the names the history uses (``f``).
OPERATIONS = (
    "capabilities",
    "read",
    "acquire",
    "renew",
    "release",
    "publish",            # ledger-publication.publish-claimed
    "publication-read",   # ledger-publication.read
    "verify",             # claim-verify (merge-coordinated profile only)
    "legacy-create",      # legacy-create-v1.commit stand-in
    "legacy-transition",  # legacy-transition-v1.commit stand-in
)

# --------------------------------------------------------------------------- state records
# Reply, Active, ClaimRecord, BackendConfig and EPOCH_MAX are the contract's own
# (``backends.contract.records``, ``backends.contract.values``); named here too, so
# ``from backends.api import Reply`` keeps working.


@dataclass(frozen=True)
class StoredOutcome:
    """A durable terminal publication outcome, keyed by (operation_id, ns, item)."""

    operation_id: str
    ledger_namespace: str
    item_id: str
    operation_digest: str
    exit: int
    envelope: dict
    request: dict | None = None  # stored when the backend keeps it


# --------------------------------------------------------------------------- errors a store raises


class StoreError(Exception):
    """Base of the storage failures the engine maps onto contract codes."""


class FloorPersistFailed(StoreError):
    """The floor write (or the commit carrying it) definitely did not persist.
    The transaction was rolled back: nothing changed. -> exit 6
    ``clock-floor-persistence-failed``."""


class CommitOutcomeUnknown(StoreError):
    """The commit was attempted and its outcome cannot be established.
    -> exit 6 ``publication-outcome-unknown`` (state ``unknown``) for a
    publication; the harness records any such reply as ``info``."""


class StoreUnavailable(StoreError):
    """The durable store cannot be reached: no decision happened.
    -> exit 6 ``claim-store-unavailable`` with ``details.reason``."""

    def __init__(self, reason: str, message: str = ""):
        super().__init__(message or reason)
        self.reason = reason


# --------------------------------------------------------------------------- storage protocol


class Txn(Protocol):
    """One serialized transaction on the durable coordinator.

    Everything read or written through one ``Txn`` is atomic: the engine opens
    one write transaction per authoritative decision, persists the floor in it,
    then decides, then writes claim / ledger / outcome in the same transaction.
    """

    def get_floor(self, ns: str) -> int | None: ...
    def set_floor(self, ns: str, ms: int) -> None: ...
    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None: ...
    def put_claim(self, rec: ClaimRecord) -> None: ...
    def get_ledger(self, ns: str, item_id: str) -> bytes | None: ...
    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None: ...
    def get_outcome(self, operation_id: str, ns: str, item_id: str) -> StoredOutcome | None: ...
    def put_outcome(self, outcome: StoredOutcome) -> None: ...


class Store(Protocol):
    """Durable storage of one backend. ``transaction(write=True)`` enters the
    serialized decision boundary (SQLite ``BEGIN IMMEDIATE``, PostgreSQL row
    locks, the Git journal lock). Leaving the ``with`` block normally commits;
    a commit failure raises ``FloorPersistFailed`` (definite rollback) or
    ``CommitOutcomeUnknown`` (ambiguous). An exception inside rolls back."""

    def transaction(self, write: bool) -> "ContextManagerTxn": ...
    def close(self) -> None: ...

    # Privileged scaffolding, never part of the advertised write paths:
    def seed(self, durable: dict) -> None:
        """Load a manifest-shaped ``durable`` object (floors, claims, ledgers, outcomes)."""
        ...

    def export_durable(self) -> dict:
        """Return the durable projection in the manifest's shape (vectors.md 11.11)."""
        ...


class ContextManagerTxn(Protocol):
    def __enter__(self) -> Txn: ...
    def __exit__(self, *exc: Any) -> bool | None: ...


# --------------------------------------------------------------------------- clock


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """The wall clock of this process (libfaketime, when preloaded, moves it)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FixedClock:
    """A clock the harness sets by hand and that does not tick (vectors pin it
    for a whole action)."""

    def __init__(self, ms: int | None = None):
        self.ms = ms

    def set(self, ms: int | None) -> None:
        self.ms = ms

    def now_ms(self) -> int:
        return self.ms if self.ms is not None else time.time_ns() // 1_000_000


class FileClock:
    """A clock shared across processes through a file holding decimal ms.

    An absent or empty file means the system clock. The harness writes the file
    atomically (tmp + ``os.replace``); every read re-reads it, so a setting is
    seen by the next decision of every process that uses the file.
    """

    def __init__(self, path: str):
        self.path = path

    def set(self, ms: int | None) -> None:
        tmp = f"{self.path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write("" if ms is None else str(int(ms)))
        os.replace(tmp, self.path)

    def now_ms(self) -> int:
        try:
            with open(self.path) as f:
                text = f.read().strip()
        except FileNotFoundError:
            text = ""
        return int(text) if text else time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- hooks


class Hooks:
    """Test hooks a harness installs on a backend. The default does nothing.

    ``before_commit(request)`` runs in ``publish`` after every validation step
    and before the serialized commit transaction is entered; a harness blocks
    there to park a paused writer (vectors.md 11.3). It must hold no lock,
    transaction or snapshot while blocked.

    ``after_commit(op, request, reply)`` runs after a successful commit and
    before the reply is returned; a harness raises ``ReplyLost`` or kills the
    process there to lose a reply that was really committed (vectors.md 11.7).
    """

    def before_commit(self, request: dict) -> None:
        return None

    def after_commit(self, op: str, request: dict, reply: Reply) -> None:
        return None


class ReplyLost(Exception):
    """Raised by a hook to drop a reply after a real commit."""


# --------------------------------------------------------------------------- client protocol


@runtime_checkable
class Backend(Protocol):
    """A backend under test, as a client sees it (Jepsen's Client).

    ``call(op, request)`` is the one entry point: ``op`` is one of
    ``OPERATIONS``, ``request`` is the raw request bytes (preferred: exercises
    strict parsing) or a dict (serialized compactly first). It always returns a
    ``Reply`` built by ``backends.contract``; it raises only for harness-level
    failures (``ReplyLost``, a dead connection, a timeout) and for a claim
    success whose commit outcome is unknown (``CommitOutcomeUnknown``: the
    contract has no honest reply for it), which a caller records as
    indeterminate (``info``).
    """

    config: BackendConfig

    def call(self, op: str, request: bytes | dict) -> Reply: ...
    def close(self) -> None: ...


@runtime_checkable
class Restartable(Protocol):
    """Optional ability: drop every bit of process state and reopen the store."""

    def restart(self) -> None: ...


def iter_ops() -> Iterator[str]:
    yield from OPERATIONS
