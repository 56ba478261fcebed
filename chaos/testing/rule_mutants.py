"""The red team: one planted bug per rule of the contract (``RED_TEAM`` in ``chaos.testing.mutants``
lists them with the rule, the contract section and the anomaly types that name each).

Each class breaks ONE rule through the engine's method for that rule
(``backends.engine.Engine``, "the rules, one method each"), or through a
transaction view where the bug is in storage: the real SQLite backend
otherwise, as the other mutants (``chaos.testing.mutants``).
"""

from __future__ import annotations

import copy
import threading

from backends.api import EPOCH_MAX, Active, ClaimRecord, Clock, Hooks, Reply
from backends.contract import decode_canonical_base64, empty_record
from backends.contract.values import is_epoch, is_owner_id
from backends.engine import fence_rejection
from backends.sqlite import SqliteBackend
from chaos.testing.mutants_base import StoreView, TxnView


class ExpiryInclusive(SqliteBackend):
    """``expiry-inclusive``: a lease counts as live AT its expires_at
    (``now <= expires_at``): renew, release, publish and takeover exactly at
    expires_at are decided as if the lease were still held."""

    def _expired(self, op, active, now):
        return now > active.expires_at

    def _fence(self, req, rec, now):
        reason = fence_rejection(req, rec, now)
        if reason == "claim-expired" and rec.active is not None and now == rec.active.expires_at:
            return None
        return reason


EARLY_TAKEOVER_MS = 250


class EarlyTakeover(SqliteBackend):
    """``early-takeover``: an acquire treats a claim as expired 250 ms early
    (a "clock skew allowance" for the taker only): a rival takes over a live
    lease."""

    def _expired(self, op, active, now):
        if op == "acquire":
            return now >= active.expires_at - EARLY_TAKEOVER_MS
        return super()._expired(op, active, now)


class WitnessIgnored(SqliteBackend):
    """``witness-ignored``: acquire never compares its CAS witness; a stale
    witness is answered by the held / free state instead of claim-conflict."""

    def _witness_matches(self, rec, req):
        return True


class EpochSkips(SqliteBackend):
    """``epoch-skips``: an acquire allocates last_epoch + 2 (a counter bumped
    once for the attempt and once for the grant)."""

    def _next_epoch(self, rec):
        nxt = super()._next_epoch(rec)
        return None if nxt is None else min(nxt + 1, EPOCH_MAX)


class EpochWraps(SqliteBackend):
    """``epoch-wraps``: at the high-water mark the epoch wraps to 1 instead
    of epoch-exhausted (an unsigned counter that overflows)."""

    def _next_epoch(self, rec):
        nxt = super()._next_epoch(rec)
        return 1 if nxt is None else nxt


class SignedEpochs(SqliteBackend):
    """``signed-epochs``: the epoch counter is a signed 64-bit integer:
    above 2**63 - 1 it reports epoch-exhausted although the unsigned
    high-water mark has room left."""

    def _next_epoch(self, rec):
        return None if rec.last_epoch >= 2**63 - 1 else super()._next_epoch(rec)


class RenewIgnoresExpiry(SqliteBackend):
    """``renew-ignores-expiry``: renew / release compare owner and epoch but
    not expected_expires_at: a stale expiry is honoured."""

    def _tuple_matches(self, active, req):
        return active.owner_id == req.owner_id and active.epoch == req.epoch


class FenceIgnoresExpiry(SqliteBackend):
    """``fence-ignores-expiry``: the publish fence checks owner and epoch but
    not that the lease is unexpired."""

    def _fence(self, req, rec, now):
        reason = fence_rejection(req, rec, now)
        return None if reason == "claim-expired" else reason


class FenceOutsideCommit(SqliteBackend):
    """``fence-outside-commit``: check, then act. The fence is decided in a
    transaction of its own, committed, and the write happens in a second
    transaction that only compares the revision: a takeover and a rival's
    publication between the two are not seen (steps 6-9 are not one
    serialized commit boundary, §6)."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.checked = threading.local()

    def _publish(self, op, req):
        ns, item = req.ledger_namespace, req.item_id
        with self.store.transaction(write=True) as txn:   # the check, committed on its own
            now = self._persist_floor(txn, ns)
            rec = txn.get_claim(ns, item) or empty_record(ns, item)
            passed = fence_rejection(req, rec, now) is None
        self.checked.passed = passed
        try:
            return super()._publish(op, req)
        finally:
            self.checked.passed = False

    def _fence(self, req, rec, now):
        if getattr(self.checked, "passed", False):
            return None                                    # BUG: trusts the earlier, committed check
        return fence_rejection(req, rec, now)


class RevisionUnchecked(SqliteBackend):
    """``revision-unchecked``: publication never compares expected_revision
    (a blind last-writer-wins overwrite)."""

    def _revision_matches(self, actual, req):
        return True


class DigestIgnoredOnReplay(SqliteBackend):
    """``digest-ignored-on-replay``: a stored outcome is replayed for ANY
    request under its operation id (no digest comparison)."""

    @staticmethod
    def _replay(stored, req, digest):
        return Reply(stored.exit, copy.deepcopy(stored.envelope))


class CandidateDigestUnchecked(SqliteBackend):
    """``candidate-digest-unchecked``: the candidate bytes are decoded but
    their SHA-256 is never compared with candidate_sha256."""

    def _candidate(self, req):
        data = decode_canonical_base64(req.candidate_source_base64)
        if data is None:
            return super()._candidate(req)
        return data


class CandidateUnvalidated(SqliteBackend):
    """``candidate-unvalidated``: the candidate is written without parsing it
    as a schema-1 item of the request's item_id (another item's bytes, or any
    text, become this item)."""

    def _candidate_issues(self, candidate, item, current):
        return None


class IncompleteRetryReplayed(SqliteBackend):
    """``incomplete-retry-replayed``: a retry that carries only the operation
    id (and its tuple) is answered from the stored outcome instead of
    invalid-request (§6: every commit attempt carries the complete request)."""

    def call(self, op, request):
        if op == "publish":
            doc = _json_object(request)
            if doc is not None and set(doc) == {"operation_id", "ledger_namespace", "item_id"}:
                with self.store.transaction(write=False) as txn:
                    stored = txn.get_outcome(doc["operation_id"], doc["ledger_namespace"], doc["item_id"])
                if stored is not None:
                    return Reply(stored.exit, copy.deepcopy(stored.envelope))
        return super().call(op, request)


class AdvisoryPublishes(SqliteBackend):
    """``advisory-publishes``: the endpoint reports itself advisory (a bypass
    writer in its inventory) but still accepts publish-claimed."""

    def configured(self, config):
        config.write_paths = dict(config.write_paths, alternate="direct-file-writer")
        return config

    def _publication_capable(self):
        return True


class MergeClaimsExclusive(SqliteBackend):
    """``merge-claims-exclusive``: a merge-coordinated endpoint that reports
    safe_exclusive_dispatch: true."""

    def _capabilities(self, op, req):
        reply = super()._capabilities(op, req)
        env = copy.deepcopy(reply.envelope)
        wc = env["result"]["operations"]["work_claim"]
        wc.update(mode="merge-coordinated", fencing_enforced_at="git-history-reconciliation",
                  safe_exclusive_dispatch=True)
        wc["write_paths"] = dict(wc["write_paths"], claimed_publication_v1="git-journal-fence")
        env["result"]["backend"]["coordination_scope"] = "shared-git-common-dir-serialized-journal"
        return Reply(reply.exit, env)


class CapabilitiesFlip(SqliteBackend):
    """``capabilities-flip``: every other capabilities call reports the
    advisory profile (a lazily loaded provisioning that races its own cache).
    The count lives in a file beside the store, so the bug shows the same way
    in one process and in a CLI that starts a process per call."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.counter = spec["path"] + ".capabilities-calls"

    def _count(self) -> int:
        import fcntl
        import os

        fd = os.open(self.counter, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            n = int(os.read(fd, 32) or b"0") + 1
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, str(n).encode())
            return n
        finally:
            os.close(fd)

    def _capabilities(self, op, req):
        if self._count() % 2 == 0:
            saved = dict(self.config.write_paths)
            self.config.write_paths = dict(saved, alternate="direct-file-writer")
            try:
                return super()._capabilities(op, req)
            finally:
                self.config.write_paths = saved
        return super()._capabilities(op, req)


class LegacyTransitionUnguarded(SqliteBackend):
    """``legacy-transition-unguarded``: legacy transition writes an item that
    has an active claim."""

    def _legacy_refusal(self, op, rec, now):
        return None if op == "legacy-transition" else super()._legacy_refusal(op, rec, now)


class LegacyCreateUnguarded(SqliteBackend):
    """``legacy-create-unguarded``: legacy create recreates an identity with
    claim history (bypassing its epoch high-water mark)."""

    def _legacy_refusal(self, op, rec, now):
        return None if op == "legacy-create" else super()._legacy_refusal(op, rec, now)


class _MemoryOutcomes(TxnView):
    """Outcomes live in process memory: gone with the process."""

    def get_outcome(self, operation_id, ns, item_id):
        return self.owner.outcomes.get((operation_id, ns, item_id))

    def put_outcome(self, outcome) -> None:
        self.owner.outcomes[(outcome.operation_id, outcome.ledger_namespace, outcome.item_id)] = outcome


class OutcomeInMemory(SqliteBackend):
    """``outcome-in-memory``: publication outcomes are kept in a process-memory
    cache instead of the database; a restart (or another process) forgets
    them, so a publication read or a retry after a lost reply finds nothing."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        self.outcomes: dict = {}
        super().__init__(spec, clock, hooks)
        self.store = StoreView(self.store, self, _MemoryOutcomes)

    def restart(self) -> None:
        super().restart()
        self.outcomes.clear()


class FreeFormMessages(SqliteBackend):
    """``free-form-messages``: error replies carry the code but a message of
    the backend's own wording (§8: the specified messages are part of v1)."""

    def call(self, op, request):
        reply = super().call(op, request)
        err = reply.envelope.get("error") if isinstance(reply.envelope, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            env = copy.deepcopy(reply.envelope)
            env["error"]["message"] = f"Request refused ({err['code'].replace('-', ' ')})."
            return Reply(reply.exit, env)
        return reply


class _RenewRewritesIssued(TxnView):
    def put_claim(self, rec) -> None:
        old = self.inner.get_claim(rec.ledger_namespace, rec.item_id)
        act = rec.active
        if act is not None and old is not None and old.active is not None and old.active.epoch == act.epoch \
                and old.active.expires_at != act.expires_at:
            floor = self.inner.get_floor(rec.ledger_namespace) or act.issued_at
            rec = ClaimRecord(rec.ledger_namespace, rec.item_id, rec.last_epoch,
                              Active(act.owner_id, act.epoch, floor, act.expires_at))   # BUG: issued_at moves
        self.inner.put_claim(rec)


class RenewRewritesIssued(SqliteBackend):
    """``renew-rewrites-issued``: a renew stores the renewal time as the
    claim's issued_at (the reply still shows the original one): the owner
    generation of an epoch changes under its holder."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.store = StoreView(self.store, self, _RenewRewritesIssued)


class _NamespaceBlind(TxnView):
    """Claims keyed by item id alone: every namespace's item shares the record
    of the first provisioned namespace (equal ids in different namespaces are
    NOT unrelated here)."""

    def _home(self) -> str:
        return sorted(self.owner.config.namespaces)[0]

    def get_claim(self, ns, item_id):
        return self.inner.get_claim(self._home(), item_id)

    def put_claim(self, rec) -> None:
        self.inner.put_claim(ClaimRecord(self._home(), rec.item_id, rec.last_epoch, rec.active))


class NamespaceBlind(SqliteBackend):
    """``namespace-blind``: the claim table is keyed by item_id only; a claim
    in one namespace is the claim of the same item id in every other one
    (and replies show the record of the namespace it was stored under)."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.store = StoreView(self.store, self, _NamespaceBlind)


class RenewExtendsExpiry(SqliteBackend):
    """``renew-extends-expiry``: a renew adds the lease to the OLD expiry
    instead of to the decision time (a lease renewed early lasts longer than
    one lease from now; one renewed late is already nearly gone)."""

    def _renewed_expiry(self, active, now, lease_ms):
        return active.expires_at + lease_ms


class ReadBackLags(SqliteBackend):
    """``read-back-lags``: an acquire's read-back shows last_epoch before the
    increment (a cached high-water mark): active.epoch != last_epoch."""

    def _acquire(self, op, req):
        reply = super()._acquire(op, req)
        if reply.exit != 0:
            return reply
        env = copy.deepcopy(reply.envelope)
        rb = env["result"]["read_back"]
        rb["last_epoch"] = str(int(rb["last_epoch"]) - 1)
        return Reply(reply.exit, env)


class _BytesNormalized(TxnView):
    def put_ledger(self, ns, item_id, data: bytes) -> None:
        self.inner.put_ledger(ns, item_id, data.rstrip(b"\n") + b"\n\n")   # BUG: "normalizes" the bytes


class BytesNormalized(SqliteBackend):
    """``bytes-normalized``: publication stores the candidate with its line
    endings "normalized" (a trailing blank line), not the exact bytes; the
    reply still names the candidate's revision."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.store = StoreView(self.store, self, _BytesNormalized)


class FencedLocalScope(SqliteBackend):
    """``fenced-local-scope``: the capability says fenced / safe_exclusive_dispatch
    while naming a local-filesystem coordination scope (which is advisory)."""

    def _capabilities(self, op, req):
        reply = super()._capabilities(op, req)
        env = copy.deepcopy(reply.envelope)
        env["result"]["backend"]["coordination_scope"] = "local-filesystem"
        return Reply(reply.exit, env)


def _json_object(request) -> dict | None:
    import json

    if isinstance(request, dict):
        return request
    try:
        doc = json.loads(bytes(request))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


class FenceGrammarUnchecked(SqliteBackend):
    """``fence-grammar-unchecked``: a publish's claim fence is checked for its
    type only, the way Wowbagger 0.1.0-alpha.7 does (F8: a non-empty owner
    string; an epoch pattern that admits 2^64 .. 18446744699999999999), so a
    noncanonical fence reaches the fence check and is decided there
    (claim-fence-rejected) instead of exit 2 invalid-request."""

    def call(self, op, request):
        doc = _json_object(request) if op == "publish" else None
        fence = doc.get("claim_fence") if doc is not None else None
        if isinstance(fence, dict):
            owner, epoch = fence.get("owner_id"), fence.get("epoch")
            if isinstance(owner, str) and owner and not is_owner_id(owner):
                fence = dict(fence, owner_id="owner-as-sent")    # compared, so it mismatches
            if isinstance(epoch, str) and epoch.isdigit() and not is_epoch(epoch, active=True):
                fence = dict(fence, epoch=str(EPOCH_MAX))         # compared, so it mismatches
            request = dict(doc, claim_fence=fence)
        return super().call(op, request)


class FloorBeforeValidation(SqliteBackend):
    """``floor-before-validation``: a publish persists the namespace's clock
    floor before it validates the candidate, the order Wowbagger
    0.1.0-alpha.7 takes (F9: ``reconcileClaimJournal`` appends its clock entry
    before ``validateCandidateLedger``), so a ledger-invalid publish moves the
    floor."""

    _namespace = None

    def _publish(self, op, req):
        self._namespace = req.ledger_namespace
        return super()._publish(op, req)

    def _candidate_issues(self, candidate, item, current):
        with self.store.transaction(write=True) as txn:
            self._persist_floor(txn, self._namespace)
        return super()._candidate_issues(candidate, item, current)
