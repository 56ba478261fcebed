"""The decision logic of the work-claim contract, written once over a ``Store``.

Every backend that owns a real transactional coordinator (reference, SQLite,
PostgreSQL) runs this engine over its own ``Store``; the engine holds no
storage detail and formats nothing itself (all replies come from
``backends.contract``).

Time. Effective time is ``max(clock.now_ms(), floor of the namespace)``. A
``read`` reports it and persists nothing. Every other decision opens ONE
``store.transaction(write=True)``, persists the floor first, then decides, so
floor + claim / ledger / outcome commit atomically; a rejection commits the
advanced floor with the unchanged state.

Store failures. ``FloorPersistFailed`` -> exit 6
``clock-floor-persistence-failed``. ``CommitOutcomeUnknown`` -> exit 6
``publication-outcome-unknown`` (state ``unknown``) for a publish; for a claim
or legacy *rejection* (only the floor was written) ->
``clock-floor-persistence-failed`` (contract §4: the floor's durability is
uncertain, so refuse to guess; claim and ledger are certainly unchanged); for
a claim *success* whose commit may have happened, ``call`` re-raises
``CommitOutcomeUnknown``: an "unchanged" reply would be a lie and no claim
code means "unknown", so there is no honest reply (the harness records the op
as ``info``). ``StoreUnavailable`` -> exit 6 ``claim-store-unavailable`` with
``details.reason``.

Where this engine follows the upstream model rather than the contract prose
(vectors.md §13.1; no vector exercises the difference, the model wins so the
vectors match exactly):

1. Publish checks the namespace binding *before* base64, size and the
   candidate digest (contract §6 lists binding after them).
2. Publish looks up the stored outcome (replay / ``idempotency-conflict``)
   *before* the capability check, the base64 / digest check and candidate
   validation (the contract lists the digest before the lookup).
3. Publish checks the ledger revision during validation too, outside the
   commit boundary, and refuses a stale one with ``ledger-revision-conflict``
   *without storing an outcome* (the model's preflight step 6). The revision
   is checked again inside the commit transaction, where the rejection is
   stored as a terminal outcome like a fence rejection.
4. ``ledger-namespace-unbound`` details are ``{ledger_namespace}`` for publish
   and ``{ledger_namespace, item_id}`` elsewhere (vectors.md §13.2).

Extensions the model does not define (vectors.md §13.5 lists them as model
throws): a permitted legacy write returns exit 0 ``committed`` with
``{read_back}`` and persists the floor but writes no ledger bytes (the
stand-in request carries none); renew / release / legacy on an untouched
tuple decide against the empty record (``claim-conflict`` / permitted);
a publish against a tuple with no ledger bytes is ``ledger-invalid`` with
shape-A reason ``item-not-found`` (ledger-item.md §4.5).

Hooks. ``hooks.before_commit(request)`` runs in publish after every
validation step, holding nothing. ``hooks.after_commit(op, request, reply)``
runs after a *fresh successful* acquire / renew / release / publish commit
(never for a replay or a stored rejection), matching the model's consumption
rule for the response-loss faults.
"""

from __future__ import annotations

import copy
import json
from typing import Callable

from backends.api import (
    Clock, CommitOutcomeUnknown, FloorPersistFailed, Hooks, Store, StoredOutcome, StoreUnavailable, Txn,
)
from backends.contract.records import Active, BackendConfig, ClaimRecord, Reply
from backends.contract.values import EPOCH_MAX
from backends.contract import (
    AcquireRequest, Code, PublicationReadRequest, PublishRequest, RenewRequest, TupleRequest,
    capabilities_reply, check_candidate, claim_error, claim_json, claim_success, compact_json, empty_record,
    format_epoch, format_instant, ledger_invalid_details, legacy_error, legacy_success, operation_digest,
    parse_request, publication_capable, publication_error, publication_read_error,
    publication_read_success, publication_success, read_back, revision, surface_error,
)
from backends.contract.envelopes import SURFACE

#: the fence rejection reasons, in the order they are checked (contract §6)
FENCE_REASONS = ("ledger-namespace-mismatch", "item-id-mismatch", "no-active-claim",
                 "owner-mismatch", "epoch-mismatch", "claim-expired")

_CLAIM_SUCCESS_OPS = ("acquire", "renew", "release")


class Engine:
    """The contract's decisions over one ``Store``; implements ``Backend``."""

    def __init__(self, store: Store, config: BackendConfig, clock: Clock, hooks: Hooks | None = None):
        self.store = store
        self.config = config
        self.clock = clock
        self.hooks = hooks if hooks is not None else Hooks()

    # ------------------------------------------------------------------ Backend protocol

    def call(self, op: str, request: bytes | dict) -> Reply:
        """One public operation. ``request`` is raw bytes or a dict (serialized
        compactly first, so strict parsing always runs)."""
        name = self._HANDLERS.get(op)
        if name is None:
            raise ValueError(f"operation {op!r} is not served by this engine")
        raw = bytes(request) if isinstance(request, (bytes, bytearray, memoryview)) else compact_json(request)
        try:
            namespaces = self.config.namespaces   # a restarted store re-reads it here
        except StoreUnavailable as exc:
            return surface_error(op, Code.CLAIM_STORE_UNAVAILABLE, {"reason": exc.reason},
                                 operation_id=request_operation_id(raw))
        parsed = parse_request(op, raw, namespaces)
        if isinstance(parsed, Reply):
            return parsed
        try:
            return getattr(self, name)(op, parsed)
        except StoreUnavailable as exc:
            return surface_error(op, Code.CLAIM_STORE_UNAVAILABLE, {"reason": exc.reason},
                                 operation_id=getattr(parsed, "operation_id", None))

    def close(self) -> None:
        self.store.close()

    def restart(self) -> None:
        """Drop process memory and reopen the store. The engine keeps no
        preflight or retry cache, so only the store has something to reopen."""
        reopen = getattr(self.store, "reopen", None)
        if callable(reopen):
            reopen()

    # ------------------------------------------------------------------ time

    def _effective(self, txn: Txn, ns: str) -> int:
        floor = txn.get_floor(ns)
        now = self.clock.now_ms()
        return now if floor is None else max(now, floor)

    def _persist_floor(self, txn: Txn, ns: str) -> int:
        """Persist effective time as the namespace floor; decisions use it."""
        now = self._effective(txn, ns)
        txn.set_floor(ns, now)
        return now

    # ------------------------------------------------------------------ capabilities, read

    def _capabilities(self, _op: str, _req) -> Reply:
        return capabilities_reply(self.config)

    def _read(self, _op: str, req: TupleRequest) -> Reply:
        with self.store.transaction(write=False) as txn:
            now = self._effective(txn, req.ledger_namespace)
            rec = txn.get_claim(req.ledger_namespace, req.item_id)
        rec = rec or empty_record(req.ledger_namespace, req.item_id)
        return claim_success("read", {"read_back": read_back(rec, now)})

    # ------------------------------------------------------------------ claim and legacy decisions

    def _decide(self, op: str, req, decide: Callable[[ClaimRecord, int], tuple[Reply, ClaimRecord | None]]) -> Reply:
        """Persist the floor, decide, write: one write transaction."""
        ns, item = req.ledger_namespace, req.item_id
        new_rec = None
        try:
            with self.store.transaction(write=True) as txn:
                now = self._persist_floor(txn, ns)
                rec = txn.get_claim(ns, item) or empty_record(ns, item)
                reply, new_rec = decide(rec, now)
                if new_rec is not None:
                    txn.put_claim(new_rec)
        except FloorPersistFailed:
            return surface_error(op, Code.CLOCK_FLOOR_PERSISTENCE_FAILED,
                                 {"ledger_namespace": ns, "item_id": item})
        except CommitOutcomeUnknown:
            if new_rec is not None:
                # The claim change may have committed. clock-floor-persistence-failed says
                # "unchanged" (contract §4, §8), which would be a lie, and no claim code says
                # "unknown": give no reply (the caller records the op as indeterminate).
                raise
            # only the floor was written: its durability is uncertain, claim and ledger are not
            return surface_error(op, Code.CLOCK_FLOOR_PERSISTENCE_FAILED,
                                 {"ledger_namespace": ns, "item_id": item})
        if reply.exit == 0 and op in _CLAIM_SUCCESS_OPS:
            self.hooks.after_commit(op, req.raw, reply)
        return reply

    def _acquire(self, op: str, req: AcquireRequest) -> Reply:
        def decide(rec: ClaimRecord, now: int):
            if not self._witness_matches(rec, req):
                return claim_error("acquire", Code.CLAIM_CONFLICT, read_back(rec, now)), None
            if rec.active is not None and not self._expired("acquire", rec.active, now):
                return claim_error("acquire", Code.CLAIM_HELD, read_back(rec, now)), None
            epoch = self._next_epoch(rec)
            if epoch is None:
                return claim_error("acquire", Code.EPOCH_EXHAUSTED, read_back(rec, now)), None
            active = Active(req.owner_id, epoch, now, now + req.lease_duration_ms)
            new = ClaimRecord(rec.ledger_namespace, rec.item_id, epoch, active)
            return claim_success("acquire", {"claim": claim_json(active), "read_back": read_back(new, now)}), new
        return self._decide(op, req, decide)

    def _renew_or_release(self, op: str, req: RenewRequest) -> Reply:
        def decide(rec: ClaimRecord, now: int):
            active = rec.active
            if active is None or not self._tuple_matches(active, req):
                return claim_error(op, Code.CLAIM_CONFLICT, read_back(rec, now)), None
            if self._expired(op, active, now):
                return claim_error(op, Code.CLAIM_EXPIRED, read_back(rec, now)), None
            if op == "renew":
                renewed = Active(active.owner_id, active.epoch, active.issued_at,
                                 self._renewed_expiry(active, now, req.lease_duration_ms))
                new = ClaimRecord(rec.ledger_namespace, rec.item_id, rec.last_epoch, renewed)
                return claim_success("renew", {"claim": claim_json(renewed), "read_back": read_back(new, now)}), new
            new = ClaimRecord(rec.ledger_namespace, rec.item_id, rec.last_epoch, None)
            return claim_success("release", {"released_claim": claim_json(active),
                                             "read_back": read_back(new, now)}), new
        return self._decide(op, req, decide)

    def _legacy(self, op: str, req: TupleRequest) -> Reply:
        command = SURFACE[op][1]

        def decide(rec: ClaimRecord, now: int):
            code = self._legacy_refusal(op, rec, now)
            if code is not None:
                return legacy_error(command, code, read_back(rec, now)), None
            return legacy_success(command, {"read_back": read_back(rec, now)}), None
        return self._decide(op, req, decide)

    # ------------------------------------------------------------------ publication

    def _publication_read(self, _op: str, req: PublicationReadRequest) -> Reply:
        with self.store.transaction(write=False) as txn:
            stored = txn.get_outcome(req.operation_id, req.ledger_namespace, req.item_id)
        if stored is None:
            return publication_read_error(
                Code.OPERATION_NOT_FOUND, {"operation_id": req.operation_id,
                                           "ledger_namespace": req.ledger_namespace, "item_id": req.item_id},
                operation_id=req.operation_id)
        return publication_read_success(req.operation_id, req.ledger_namespace, req.item_id,
                                        stored.operation_digest, stored.exit, copy.deepcopy(stored.envelope))

    @staticmethod
    def _replay(stored: StoredOutcome, req: PublishRequest, digest: str) -> Reply:
        """Same digest: the stored envelope verbatim. Else idempotency-conflict."""
        if stored.operation_digest == digest:
            return Reply(stored.exit, copy.deepcopy(stored.envelope))
        return publication_error(Code.IDEMPOTENCY_CONFLICT, {
            "operation_id": req.operation_id,
            "expected_operation_digest": stored.operation_digest,
            "actual_operation_digest": digest,
        }, operation_id=req.operation_id)

    def _publish(self, _op: str, req: PublishRequest) -> Reply:
        ns, item, op_id = req.ledger_namespace, req.item_id, req.operation_id
        digest = operation_digest(req.raw)
        # validation phase: a read transaction, released before the hook
        with self.store.transaction(write=False) as txn:
            stored = txn.get_outcome(op_id, ns, item)
            current = txn.get_ledger(ns, item)
        if stored is not None:
            return self._replay(stored, req, digest)
        if not self._publication_capable():
            return publication_error(Code.CAPABILITY_UNAVAILABLE, {"reason": "advisory-capability"},
                                     operation_id=op_id)
        candidate = self._candidate(req)
        if isinstance(candidate, Reply):
            return candidate
        issues = self._candidate_issues(candidate, item, current)
        if issues is not None:
            return publication_error(Code.LEDGER_INVALID, issues, operation_id=op_id)
        actual = revision(current) if current is not None else None
        if not self._revision_matches(actual, req):
            return self._revision_conflict(req, actual)  # not stored: validation-time refusal

        self.hooks.before_commit(req.raw)

        fresh = False
        try:
            with self.store.transaction(write=True) as txn:
                stored = txn.get_outcome(op_id, ns, item)
                if stored is not None:  # an identical publish committed while we validated
                    reply = self._replay(stored, req, digest)
                else:
                    reply = self._commit_publication(txn, req, candidate)
                    txn.put_outcome(StoredOutcome(op_id, ns, item, digest, reply.exit,
                                                  copy.deepcopy(reply.envelope), copy.deepcopy(req.raw)))
                    fresh = True
        except FloorPersistFailed:
            return publication_error(Code.CLOCK_FLOOR_PERSISTENCE_FAILED,
                                     {"ledger_namespace": ns, "item_id": item}, operation_id=op_id)
        except CommitOutcomeUnknown:
            return publication_error(Code.PUBLICATION_OUTCOME_UNKNOWN,
                                     {"operation_id": op_id, "ledger_namespace": ns, "item_id": item},
                                     operation_id=op_id)
        if fresh and reply.exit == 0:
            self.hooks.after_commit("publish", req.raw, reply)
        return reply

    def _commit_publication(self, txn: Txn, req: PublishRequest, candidate: bytes) -> Reply:
        """Steps 6-9 inside the serialized boundary: floor, fence, revision, write."""
        ns, item = req.ledger_namespace, req.item_id
        now = self._persist_floor(txn, ns)
        rec = txn.get_claim(ns, item) or empty_record(ns, item)
        reason = self._fence(req, rec, now)
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
        if not self._revision_matches(actual, req):
            return self._revision_conflict(req, actual)
        txn.put_ledger(ns, item, candidate)
        return publication_success(req.operation_id, {
            "ledger_namespace": ns,
            "item_id": item,
            "committed_revision": revision(candidate),
            "claim_fence": copy.deepcopy(req.raw["claim_fence"]),
            "claim_read_back": read_back(rec, now),
        })

    # ------------------------------------------------------------------ the rules, one method each
    # Each rule the decisions above apply is decided in exactly one method, so the
    # suite's planted bugs and mutants (chaos.testing) break one rule in a subclass
    # without copying a decision.

    def _fence(self, req: PublishRequest, rec: ClaimRecord, now: int) -> str | None:
        """§6 step 7: the first failing fence dimension, or None."""
        return fence_rejection(req, rec, now)

    def _expired(self, op: str, active: Active, now: int) -> bool:
        """§4: a lease is active exactly while effective now < expires_at."""
        return now >= active.expires_at

    def _witness_matches(self, rec: ClaimRecord, req: AcquireRequest) -> bool:
        """§5 Acquire 1: the CAS witness is the complete last_epoch and active."""
        return rec.last_epoch == req.expected_last_epoch and rec.active == req.expected_active

    def _next_epoch(self, rec: ClaimRecord) -> int | None:
        """§4, §5 Acquire 3-4: exactly last_epoch + 1; None when exhausted (never wrap)."""
        return None if rec.last_epoch >= EPOCH_MAX else rec.last_epoch + 1

    def _renewed_expiry(self, active: Active, now: int, lease_ms: int) -> int:
        """§4, §5 Renew: a renewed expiry is the persisted decision time + the lease."""
        return now + lease_ms

    def _tuple_matches(self, active: Active, req: RenewRequest) -> bool:
        """§5 Renew, Release: owner, epoch and expected expiry are one CAS tuple."""
        return (active.owner_id == req.owner_id and active.epoch == req.epoch
                and active.expires_at == req.expected_expires_at)

    def _legacy_refusal(self, op: str, rec: ClaimRecord, now: int) -> str | None:
        """§7: legacy create refuses claim history; legacy transition an active claim."""
        if op == "legacy-create" and rec.last_epoch != 0:
            return Code.CLAIMED_ITEM_WRITE_REFUSED
        if op == "legacy-transition" and rec.active is not None and not self._expired(op, rec.active, now):
            return Code.ACTIVE_CLAIM_WRITE_REFUSED
        return None

    def _publication_capable(self) -> bool:
        """§3, §6: an advisory endpoint refuses every publish-claimed."""
        return publication_capable(self.config)

    def _candidate(self, req: PublishRequest) -> bytes | Reply:
        """§6 step 2: canonical base64, size, and the candidate digest."""
        return check_candidate(req)

    def _candidate_issues(self, candidate: bytes, item: str, current: bytes | None):
        """§6 step 5: the candidate is a schema-1 item whose id is the request's."""
        return ledger_invalid_details(candidate, item, current)

    def _revision_matches(self, actual: str | None, req: PublishRequest) -> bool:
        """§6 step 8: the durable revision equals expected_revision."""
        return actual == req.expected_revision

    @staticmethod
    def _revision_conflict(req: PublishRequest, actual: str | None) -> Reply:
        return publication_error(Code.LEDGER_REVISION_CONFLICT, {
            "ledger_namespace": req.ledger_namespace,
            "item_id": req.item_id,
            "expected_revision": req.expected_revision,
            "actual_revision": actual,
        }, operation_id=req.operation_id)

    #: op -> method name, looked up per call so a subclass can override one
    _HANDLERS: dict[str, str] = {
        "capabilities": "_capabilities",
        "read": "_read",
        "acquire": "_acquire",
        "renew": "_renew_or_release",
        "release": "_renew_or_release",
        "legacy-create": "_legacy",
        "legacy-transition": "_legacy",
        "publish": "_publish",
        "publication-read": "_publication_read",
    }


def request_operation_id(request: bytes | dict) -> str | None:
    """The ``operation_id`` string a request names, unchecked (a store-unavailable reply echoes it
    before the request is parsed); ``None`` if it names none or is not a JSON object."""
    if not isinstance(request, dict):
        try:
            request = json.loads(request)
        except ValueError:
            return None
    oid = request.get("operation_id") if isinstance(request, dict) else None
    return oid if isinstance(oid, str) else None


def fence_rejection(req: PublishRequest, rec: ClaimRecord, now: int) -> str | None:
    """The first failing fence dimension (contract §6 order), or None.
    ``rec`` is always the *request tuple's* record: a wrong fence namespace or
    item never falls through to another record."""
    active = rec.active
    if req.fence_namespace != req.ledger_namespace:
        return "ledger-namespace-mismatch"
    if req.fence_item_id != req.item_id:
        return "item-id-mismatch"
    if active is None:
        return "no-active-claim"
    if active.owner_id != req.fence_owner_id:
        return "owner-mismatch"
    if active.epoch != req.fence_epoch:
        return "epoch-mismatch"
    if now >= active.expires_at:
        return "claim-expired"
    return None
