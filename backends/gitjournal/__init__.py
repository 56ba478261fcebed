"""The Git-journal backend: the merge-coordinated profile of contract §3/§6.

A ledger directory inside a git work tree holds the items
(``<ledger>/<item_id>.md``) and, once provisioned, ``.claim-namespace``
(committed to Git). The coordinator is the namespace journal in the
repository's git COMMON directory, shared by every worktree
(``backends.gitjournal.journal``), serialized by an owner-recording lock file
(``lock``). The shared ``Engine`` decides everything; ``store`` supplies the
lock-as-transaction and the fsync-ordered appends; ``verify`` is
``claim-verify``. A publication read and a publish first settle the pending
intents they would answer from (``GitJournalStore.settle``).

Capabilities: a provisioned ledger is ``merge-coordinated`` (never safe for
exclusive dispatch), bound to its one namespace. An unprovisioned git ledger
is advisory and refuses ``publish-claimed`` before reading any input (no
``operation_id``, contract §6). Outside a git work tree every decision is
``claim-store-unavailable`` with ``details.reason: "git-directory-not-found"``.

``open_backend(spec, clock, hooks)``; spec keys: ``ledger`` (directory),
optional ``name``, ``lock_wait_ms`` (bounded wait for a busy lock, default
5000). ``ledgers`` (a list of directories) opens several endpoints behind one
router (``endpoints.py``: the NS2 conformance cases run as two endpoints).
"""

from __future__ import annotations

from backends.api import Backend, Clock, Hooks, StoreUnavailable
from backends.contract.records import BackendConfig, Reply
from backends.contract import (
    MERGE_SCOPE, MERGE_WRITE_PATHS, Code, publication_error, publication_read_error, surface_error,
)
from backends.engine import Engine
from backends.gitjournal.ledger import Ledger, open_ledger, provision
from backends.gitjournal.lock import DEFAULT_WAIT_S
from backends.gitjournal.store import GitJournalStore

DEFAULT_NAME = "local-filesystem-git-journal"
ADVISORY_SCOPE = "local-filesystem"

__all__ = ["GitJournalBackend", "open_backend", "provision", "open_ledger", "DEFAULT_NAME"]


class _NoStore:
    """The store of an unprovisioned or non-git ledger: nothing to decide on."""

    def __init__(self, reason: str):
        self.reason = reason
        self.faults: dict[str, bool] = {}

    def transaction(self, write: bool):
        raise StoreUnavailable(self.reason)

    def settle(self, concerns):
        raise StoreUnavailable(self.reason)

    def close(self) -> None:
        return None

    def export_durable(self) -> dict:
        return {"clock_floors": [], "claims": [], "ledgers": [], "publication_outcomes": []}


def config_for(ledger: Ledger, name: str) -> BackendConfig:
    if ledger.namespace is not None:
        return BackendConfig(name=name, namespaces=[ledger.namespace], coordination_scope=MERGE_SCOPE,
                             write_paths=dict(MERGE_WRITE_PATHS), profile="merge-coordinated")
    return BackendConfig(name=name, namespaces=[], coordination_scope=ADVISORY_SCOPE,
                         write_paths=dict(MERGE_WRITE_PATHS), profile="advisory")


class GitJournalBackend(Engine):
    """The engine over one ledger, plus ``verify`` (claim-verify)."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        self.spec = dict(spec)
        self.name = spec.get("name", DEFAULT_NAME)
        self.lock_wait_s = spec.get("lock_wait_ms", DEFAULT_WAIT_S * 1000) / 1000.0
        ledger = open_ledger(spec["ledger"])
        super().__init__(self._store_for(ledger), config_for(ledger, self.name), clock, hooks)
        self.ledger = ledger

    def _store_for(self, ledger: Ledger):
        if not ledger.in_git:
            return _NoStore("git-directory-not-found")
        if ledger.namespace is None:
            return _NoStore("namespace-not-provisioned")
        return GitJournalStore(ledger, self.lock_wait_s)

    @property
    def provisioned(self) -> bool:
        return self.ledger.namespace is not None

    def call(self, op: str, request: bytes | dict) -> Reply:
        if op == "verify":
            return self.verify()
        if op == "publish" and not self.provisioned:
            return self.refuse_publish()
        if not self.ledger.in_git and op != "capabilities":
            return surface_error(op, Code.CLAIM_STORE_UNAVAILABLE, {"reason": "git-directory-not-found"})
        return super().call(op, request)

    @staticmethod
    def refuse_publish() -> Reply:
        """Advisory: categorical refusal before reading input (no operation_id)."""
        return publication_error(Code.CAPABILITY_UNAVAILABLE, {"reason": "advisory-capability"})

    def verify(self) -> Reply:
        from backends.contract import verify as vs
        from backends.gitjournal.verify import verify
        from backends.contract import error

        if not self.provisioned:
            reason = "git-directory-not-found" if not self.ledger.in_git else None
            if reason:
                return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.CLAIM_STORE_UNAVAILABLE, {"reason": reason})
            return error(vs.VERIFY_NAMESPACE, vs.VERIFY_COMMAND, Code.CAPABILITY_UNAVAILABLE,
                         {"reason": "advisory-capability"})
        return verify(self.store, self.clock)

    # ------------------------------------------------------------------ reads after a crash

    def _publication_read(self, op: str, req) -> Reply:
        """A pending intent of this operation is reconciled first; one whose
        bytes say neither yes nor no is ``publication-outcome-unknown``
        (never ``operation-not-found``: the publication may have happened)."""
        key = (req.operation_id, req.item_id)
        if self.store.settle(lambda k: k == key):
            return publication_read_error(
                Code.PUBLICATION_OUTCOME_UNKNOWN, {"operation_id": req.operation_id,
                                                   "ledger_namespace": req.ledger_namespace,
                                                   "item_id": req.item_id},
                operation_id=req.operation_id)
        return super()._publication_read(op, req)

    def _publish(self, op: str, req) -> Reply:
        """Pending intents on this item are reconciled before validation reads
        the stored outcome and the item's revision (a dead writer's bytes in
        place are its committed publication, so its retry is a replay)."""
        self.store.settle(lambda k: k[1] == req.item_id)
        return super()._publish(op, req)

    def restart(self) -> None:
        """Re-read the ledger from disk (a provisioning made meanwhile counts)."""
        ledger = open_ledger(self.spec["ledger"])
        self.ledger, self.store, self.config = ledger, self._store_for(ledger), config_for(ledger, self.name)


def open_backend(spec: dict, clock: Clock, hooks: Hooks) -> Backend:
    if "ledgers" in spec:
        from backends.gitjournal.endpoints import EndpointGroup

        return EndpointGroup([GitJournalBackend({**spec, "ledger": d}, clock, hooks) for d in spec["ledgers"]])
    return GitJournalBackend(spec, clock, hooks)
