"""Mutant backends: realistic, named bugs that backend authors really write.

Each mutant is the real SQLite backend (``backends.engine.Engine`` over a
real ``SqliteStore`` file) with ONE rule of the contract broken the way
people break it. Each is a registry ``"python"`` backend, so ``chaos run``
workers and conformance hosts load it by module path exactly like sqlite::

    {"backend": "python", "factory": "chaos.testing.mutants:open_no_fence_epoch",
     "path": ".../claims.db", "namespaces": [...]}

``MUTANTS`` (name -> ``Mutant``) is the catalogue: the factory, what the bug
is, whether it is a safety bug, and the chaos checker(s) that name it.
``read-persists-floor`` is a *control*: it breaks a rule of the contract
(reads persist nothing) that conformance checks but that is not a safety
property, so the chaos checkers may legitimately pass it.

``RED_TEAM`` (name -> ``PlantedBug``) is the red team: one planted bug per
rule, its classes in ``chaos.testing.rule_mutants`` and
``chaos.testing.cta_mutants``; each opens by ``open_<name>`` here.

``chaos.testing.mutants_detect`` runs them through conformance and ``chaos
run``; ``docs/mutants.md`` has the measured detection matrix.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from backends.api import ClaimRecord, Clock, Hooks, Reply
from backends.contract import Code, claim_error, claim_success, empty_record, read_back
from backends.contract.capabilities import REQUIRED_WRITE_PATHS
from backends.engine import fence_rejection
from backends.sqlite import SqliteBackend
from chaos.testing.cta_mutants import CHECK_THEN_ACT
from chaos.testing.mutants_base import StoreView, TxnView
from chaos.testing.rule_mutants import (
    ExpiryInclusive, EarlyTakeover, WitnessIgnored, EpochSkips, EpochWraps, SignedEpochs, RenewIgnoresExpiry,
    FenceIgnoresExpiry, FenceOutsideCommit, RevisionUnchecked, DigestIgnoredOnReplay, CandidateDigestUnchecked,
    CandidateUnvalidated, IncompleteRetryReplayed, AdvisoryPublishes, MergeClaimsExclusive, CapabilitiesFlip,
    LegacyTransitionUnguarded, LegacyCreateUnguarded, OutcomeInMemory, FreeFormMessages, RenewRewritesIssued,
    NamespaceBlind, RenewExtendsExpiry, ReadBackLags, BytesNormalized, FencedLocalScope, FenceGrammarUnchecked,
    FloorBeforeValidation)


# --------------------------------------------------------------------------- fence bugs


def _claimed_by_anyone(req, rec: ClaimRecord, now: int) -> str | None:
    """'Is the item claimed?' instead of 'do *you* hold it, under this epoch?'."""
    reason = fence_rejection(req, rec, now)
    return None if reason in ("owner-mismatch", "epoch-mismatch") else reason


class NoFenceEpoch(SqliteBackend):
    """``no-fence-epoch``: the publish fence checks that the item has a live
    lease, but not that the caller's owner and epoch are the ones holding it.
    A paused writer whose lease was taken over publishes over the new holder
    (a stale write) because *someone* holds a live lease."""

    def _fence(self, req, rec, now):
        return _claimed_by_anyone(req, rec, now)


def _owner_only(req, rec: ClaimRecord, now: int) -> str | None:
    """The owner is compared, the epoch is not ('it is still me')."""
    reason = fence_rejection(req, rec, now)
    return None if reason == "epoch-mismatch" else reason


class FenceOwnerOnly(SqliteBackend):
    """``fence-owner-only``: the publish fence compares the owner but not the
    epoch. A holder that lost its lease and re-acquired the item under the
    same ``owner_id`` (a restarted agent that reuses its host name) can still
    publish with its old epoch: a stale write by "the same" owner."""

    def _fence(self, req, rec, now):
        return _owner_only(req, rec, now)


class AdvisoryClaimsFenced(SqliteBackend):
    """``advisory-claims-fenced``: publication is routed through the direct
    (unfenced) writer - only the revision is compared - while the capability
    reply still says ``fenced`` / ``safe_exclusive_dispatch: true``; a bypass
    writer declared in the file is hidden from the inventory too."""

    def configured(self, config):
        if config.namespaces:
            config.write_paths = dict(REQUIRED_WRITE_PATHS)
        return config

    def _fence(self, req, rec, now):
        return None


# --------------------------------------------------------------------------- clock and floor bugs


class ExpiryByWorkerClock(SqliteBackend):
    """``expiry-by-worker-clock``: effective time is the caller's physical
    clock. The floor is still written (``max(floor, now)``, so the file looks
    right) but never consulted, so a worker whose clock steps back decides
    in the past: an expired lease is live again for it (resurrected)."""

    def _effective(self, txn, ns: str) -> int:
        return self.clock.now_ms()

    def _persist_floor(self, txn, ns: str) -> int:
        now = self.clock.now_ms()
        floor = txn.get_floor(ns)
        txn.set_floor(ns, now if floor is None else max(now, floor))
        return now


class FloorNotPersistedOnReject(SqliteBackend):
    """``floor-not-persisted-on-reject``: only a state change persists the
    floor; a rejection (claim-held, claim-conflict, claim-expired, a fence
    rejection, a legacy refusal) commits nothing, so the time it reported can
    be un-said after a backward clock step or a restart."""

    def _decide(self, op: str, req, decide):
        ns, item = req.ledger_namespace, req.item_id
        with self.store.transaction(write=True) as txn:
            now = self._effective(txn, ns)
            rec = txn.get_claim(ns, item) or empty_record(ns, item)
            reply, new_rec = decide(rec, now)
            if reply.exit == 0 and new_rec is not None:
                txn.set_floor(ns, now)       # BUG: a rejection never persists its time
                txn.put_claim(new_rec)
        if reply.exit == 0 and op in ("acquire", "renew", "release"):
            self.hooks.after_commit(op, req.raw, reply)
        return reply

    def _commit_publication(self, txn, req, candidate):
        return super()._commit_publication(_FloorOnlyOnWrite(txn, self), req, candidate)


class _FloorOnlyOnWrite(TxnView):
    """The publish floor is written only together with the ledger bytes: a
    fence or revision rejection drops the time it reported (the bug)."""

    def __init__(self, inner, owner):
        super().__init__(inner, owner)
        self.pending: tuple[str, int] | None = None

    def set_floor(self, ns: str, ms: int) -> None:
        self.pending = (ns, ms)

    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None:
        if self.pending is not None:
            self.inner.set_floor(*self.pending)
        self.inner.put_ledger(ns, item_id, data)


class ReadPersistsFloor(SqliteBackend):
    """``read-persists-floor`` (CONTROL, not a safety bug): ``read`` persists
    effective time as the floor. Conformance flags it (vectors.md 5.1 rule 3:
    a read persists nothing); no safety property depends on it."""

    def _read(self, _op: str, req) -> Reply:
        with self.store.transaction(write=True) as txn:
            now = self._persist_floor(txn, req.ledger_namespace)
            rec = txn.get_claim(req.ledger_namespace, req.item_id)
        rec = rec or empty_record(req.ledger_namespace, req.item_id)
        return claim_success("read", {"read_back": read_back(rec, now)})


# --------------------------------------------------------------------------- epoch high-water mark in memory


class _HwmTxn(TxnView):
    """Only the active lease is durable; ``last_epoch`` lives in process memory."""

    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None:
        rec = self.inner.get_claim(ns, item_id)
        hwm = self.owner.hwm.get((ns, item_id), 0)
        if rec is None:
            return ClaimRecord(ns, item_id, hwm, None) if hwm else None
        stored = rec.active.epoch if rec.active is not None else 0   # BUG: the stored high-water mark is ignored
        return ClaimRecord(ns, item_id, max(hwm, stored), rec.active)

    def put_claim(self, rec: ClaimRecord) -> None:
        key = (rec.ledger_namespace, rec.item_id)
        self.owner.hwm[key] = max(self.owner.hwm.get(key, 0), rec.last_epoch)
        durable_epoch = rec.active.epoch if rec.active is not None else 0
        self.inner.put_claim(ClaimRecord(rec.ledger_namespace, rec.item_id, durable_epoch, rec.active))


class EpochReuseAfterRestart(SqliteBackend):
    """``epoch-reuse-after-restart``: the epoch high-water mark is a counter
    in process memory, seeded from the stored *active* epoch. After a release
    and a restart (or in any other process) the next acquire allocates an
    epoch that was already used: ABA."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        self.hwm: dict[tuple[str, str], int] = {}
        super().__init__(spec, clock, hooks)
        self.store = StoreView(self.store, self, _HwmTxn)

    def restart(self) -> None:
        super().restart()
        self.hwm.clear()


# --------------------------------------------------------------------------- publication idempotence


class _NoLookupTxn(TxnView):
    """During ``publish`` the stored outcome is never looked up, and a second
    outcome for an id is silently dropped (the first row stays)."""

    def get_outcome(self, operation_id, ns, item_id):
        if getattr(self.owner.publishing, "active", False):
            return None                          # BUG: publish never consults the stored outcome
        return self.inner.get_outcome(operation_id, ns, item_id)

    def put_outcome(self, outcome) -> None:
        if self.inner.get_outcome(outcome.operation_id, outcome.ledger_namespace, outcome.item_id) is None:
            self.inner.put_outcome(outcome)


class NonIdempotentPublish(SqliteBackend):
    """``non-idempotent-publish``: a retry with the same ``operation_id`` and
    request is decided afresh instead of replaying the stored envelope (after
    a lost reply it answers ``ledger-revision-conflict``, or writes again)."""

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.publishing = threading.local()
        self.store = StoreView(self.store, self, _NoLookupTxn)

    def _publish(self, op: str, req) -> Reply:
        self.publishing.active = True
        try:
            return super()._publish(op, req)
        finally:
            self.publishing.active = False


# --------------------------------------------------------------------------- lying about a commit


class LyingUnchanged(SqliteBackend):
    """``lying-unchanged``: a post-commit step (here: an audit append that
    fails for every third epoch) raises after COMMIT, and the error handler
    answers ``claim-held`` / ``state: "unchanged"`` - a definite rejection -
    although the acquire committed and the caller now holds the lease."""

    def _acquire(self, op: str, req) -> Reply:
        reply = super()._acquire(op, req)
        if reply.exit == 0 and int(reply.envelope["result"]["claim"]["epoch"]) % 3 == 0:
            return claim_error("acquire", Code.CLAIM_HELD, reply.envelope["result"]["read_back"])  # BUG
        return reply


# --------------------------------------------------------------------------- catalogue


@dataclass(frozen=True)
class Mutant:
    name: str
    factory: str                 # "module:function" for the registry's "python" backend
    bug: str                     # one line: what is broken
    safety: bool = True          # False: a control that chaos checkers may pass
    checkers: tuple = ()         # chaos checkers that name it; () = only conformance catches it
                                 # (the claims workload never creates the situation; docs/mutants.md)


def _m(name: str, fn: str, bug: str, checkers: tuple, safety: bool = True) -> Mutant:
    return Mutant(name, f"chaos.testing.mutants:{fn}", bug, safety, checkers)


MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    _m("no-fence-epoch", "open_no_fence_epoch", "publish fence ignores owner and epoch (any live lease admits it)",
       ("stale_write", "capability_honesty")),
    _m("fence-owner-only", "open_fence_owner_only", "publish fence compares the owner but not the epoch",
       ("stale_write",)),
    _m("expiry-by-worker-clock", "open_expiry_by_worker_clock",
       "effective time = caller's physical clock; floors never consulted", ("floors", "dual_ownership")),
    _m("floor-not-persisted-on-reject", "open_floor_not_persisted_on_reject",
       "rejections do not persist the floor", ("floors", "durability")),
    _m("epoch-reuse-after-restart", "open_epoch_reuse_after_restart",
       "epoch high-water mark in process memory (ABA after restart)", ("epochs", "durability")),
    _m("non-idempotent-publish", "open_non_idempotent_publish",
       "a retried publish is decided afresh instead of replayed", ("idempotence",)),
    _m("lying-unchanged", "open_lying_unchanged",
       "a committed acquire is reported as claim-held (state unchanged)", ("durability",)),
    _m("read-persists-floor", "open_read_persists_floor", "read persists the floor (control, not safety)",
       (), safety=False),
    _m("advisory-claims-fenced", "open_advisory_claims_fenced",
       "capability says fenced while publication bypasses the fence", ("capability_honesty", "stale_write")),
)}


def open_no_fence_epoch(spec, clock, hooks):
    return NoFenceEpoch(spec, clock, hooks)


def open_fence_owner_only(spec, clock, hooks):
    return FenceOwnerOnly(spec, clock, hooks)


def open_expiry_by_worker_clock(spec, clock, hooks):
    return ExpiryByWorkerClock(spec, clock, hooks)


def open_floor_not_persisted_on_reject(spec, clock, hooks):
    return FloorNotPersistedOnReject(spec, clock, hooks)


def open_epoch_reuse_after_restart(spec, clock, hooks):
    return EpochReuseAfterRestart(spec, clock, hooks)


def open_non_idempotent_publish(spec, clock, hooks):
    return NonIdempotentPublish(spec, clock, hooks)


def open_lying_unchanged(spec, clock, hooks):
    return LyingUnchanged(spec, clock, hooks)


def open_read_persists_floor(spec, clock, hooks):
    return ReadPersistsFloor(spec, clock, hooks)


def open_advisory_claims_fenced(spec, clock, hooks):
    return AdvisoryClaimsFenced(spec, clock, hooks)


# --------------------------------------------------------------------------- the red team catalogue


@dataclass(frozen=True)
class PlantedBug:
    """One MUST of the contract broken in one backend.

    ``rule``: the rule id (``checkers.rules``, docs/rules.md) or, for the
    three §6 validation steps no invariant judged before, this module's
    ``requests`` checker rule; ``section``: where the contract says it;
    ``names``: the anomaly types that name this rule (any one of them, from
    any checker, counts as "named by the rule it breaks"); ``cls``: the
    backend class. ``factory`` (``chaos.testing.mutants:open_<name>``) opens it
    as a Python class (``chaos run --backend python --factory ...``) and
    behind a contract CLI (``chaos backend python --factory ...``, driven by
    ``chaos run --backend external``)."""

    name: str
    rule: str
    section: str
    must: str
    cls: type
    names: tuple

    @property
    def factory(self) -> str:
        return f"chaos.testing.mutants:open_{self.name.replace('-', '_')}"


def _p(name, rule, section, must, cls, *names) -> PlantedBug:
    return PlantedBug(name, rule, section, must, cls, names)


RED_TEAM: dict[str, PlantedBug] = {b.name: b for b in (
    _p("namespace-blind", "tuple-identity", "§2",
       "equal item ids in different namespaces are unrelated; a reply names the request's tuple", NamespaceBlind,
       "reply-for-another-tuple", "overlapping-leases", "two-owners-one-epoch"),
    _p("fenced-local-scope", "fenced-profile", "§3",
       "fenced needs a shared transactional coordinator (a local-filesystem scope is advisory)",
       FencedLocalScope, "fenced-profile-inconsistent"),
    _p("read-back-lags", "active-epoch", "§4", "active.epoch equals last_epoch", ReadBackLags,
       "epoch-readback-mismatch"),
    _p("renew-extends-expiry", "times-from-decision", "§4, §5 Renew",
       "a renewed expiry is the persisted decision time + lease_duration_ms", RenewExtendsExpiry,
       "expiry-not-from-decision-time"),
    _p("bytes-normalized", "exact-bytes", "§6 step 9", "publish the exact candidate bytes", BytesNormalized,
       "ledger-bytes-mismatch", "unaccepted-revision", "committed-revision-mismatch"),
    _p("advisory-claims-fenced", "fenced-promise", "§1, §3",
       "a fenced backend enumerates every write path; a bypass prevents mode fenced", AdvisoryClaimsFenced,
       "fenced-but-unsafe", "fenced-profile-inconsistent", "stale-fence-accepted"),
    _p("advisory-publishes", "advisory-refuses", "§3, §6",
       "an advisory endpoint MUST reject publish-claimed", AdvisoryPublishes, "advisory-published"),
    _p("merge-claims-exclusive", "merge-not-exclusive", "§1, §3, §7",
       "the Git-journal profile MUST report safe_exclusive_dispatch: false", MergeClaimsExclusive,
       "merge-coordinated-claims-exclusive"),
    _p("capabilities-flip", "capabilities-stable", "§3",
       "the ledger's capability envelope is one profile (a caller MUST gate publish-claimed on it)",
       CapabilitiesFlip, "capabilities-changed"),
    _p("expiry-inclusive", "lease-active-while", "§4",
       "a lease is active exactly while effective_now < expires_at; equality is expired", ExpiryInclusive,
       "renew-after-expiry", "false-claim-held", "stale-fence-accepted", "overlapping-leases", "early-takeover"),
    _p("early-takeover", "acquire-held", "§5 Acquire 2",
       "an equal witness with an unexpired active claim is claim-held", EarlyTakeover,
       "early-takeover", "overlapping-leases", "false-claim-expired"),
    _p("expiry-by-worker-clock", "floor-monotonic", "§4",
       "effective_now = max(physical_utc, durable floor); a backward step cannot resurrect time",
       ExpiryByWorkerClock, "decision-time-regressed", "final-floor-lost"),
    _p("floor-not-persisted-on-reject", "floor-monotonic", "§4",
       "every authoritative decision, a rejection too, MUST durably persist the floor before replying",
       FloorNotPersistedOnReject, "decision-time-regressed", "final-floor-lost"),
    _p("epoch-wraps", "epoch-never-reused", "§2, §4",
       "at the epoch high-water mark: epoch-exhausted; epochs MUST NOT wrap", EpochWraps,
       "epoch-decreased", "epoch-reallocated", "false-epoch-exhausted", "epoch-not-next"),
    _p("signed-epochs", "epoch-exhausted", "§2, §4",
       "epochs are unsigned 64-bit: epoch-exhausted only at 18446744073709551615", SignedEpochs,
       "false-epoch-exhausted"),
    _p("lying-unchanged", "unchanged-means-unchanged", "§4, §8",
       "a reply whose time or change was not persisted is never a success or a semantic rejection; "
       "state unchanged means nothing changed", LyingUnchanged,
       "failed-acquire-took-effect", "unchanged-reply-took-effect", "epoch-consumed-silently"),
    _p("witness-ignored", "acquire-witness", "§5 Acquire 1",
       "an unequal CAS witness is claim-conflict", WitnessIgnored,
       "false-claim-held", "witness-mismatch-accepted", "false-claim-conflict"),
    _p("epoch-skips", "acquire-next-epoch", "§5 Acquire 4", "a successful acquire allocates exactly last_epoch + 1",
       EpochSkips, "epoch-not-next"),
    _p("epoch-reuse-after-restart", "epoch-never-reused", "§2, §5 Release",
       "epochs never decrement or get reused, across restart too", EpochReuseAfterRestart,
       "epoch-reallocated", "epoch-decreased", "epoch-reused", "epoch-high-water-lost", "final-epoch-lost"),
    _p("renew-ignores-expiry", "renew-release-cas", "§5 Renew, Release",
       "owner, epoch and expected expiry are one CAS tuple: a mismatch is claim-conflict", RenewIgnoresExpiry,
       "false-claim-conflict", "renew-after-expiry", "false-claim-expired", "stale-expiry-accepted"),
    _p("renew-rewrites-issued", "epoch-one-owner", "§2, §4, §5 Renew",
       "renew retains issued_at and epoch: an epoch is one owner generation", RenewRewritesIssued,
       "two-owners-one-epoch", "epoch-reused"),
    _p("digest-ignored-on-replay", "idempotency", "§6 step 4",
       "a different digest under a stored operation_id is idempotency-conflict", DigestIgnoredOnReplay,
       "idempotency-conflict-missing", "replay-differs"),
    _p("non-idempotent-publish", "idempotency", "§6 step 4, §8",
       "an identical retry returns the stored terminal envelope without a second write", NonIdempotentPublish,
       "retry-not-replayed", "replay-differs", "operation-id-bound-twice"),
    _p("candidate-digest-unchecked", "candidate-digest", "§6 step 2",
       "the candidate's SHA-256 MUST equal candidate_sha256", CandidateDigestUnchecked,
       "candidate-digest-accepted", "committed-revision-mismatch"),
    _p("incomplete-retry-replayed", "complete-request", "§6",
       "every commit attempt MUST carry the complete request; an operation id alone is invalid-request",
       IncompleteRetryReplayed, "incomplete-request-accepted"),
    _p("candidate-unvalidated", "candidate-valid", "§6 step 5",
       "candidate validation MUST parse a schema-1 item whose id equals item_id", CandidateUnvalidated,
       "invalid-candidate-accepted"),
    _p("no-fence-epoch", "fence", "§6 step 7",
       "publication commits only under the active owner generation (owner AND epoch)", NoFenceEpoch,
       "stale-fence-accepted", "false-fence-rejection"),
    _p("fence-owner-only", "fence", "§6 step 7",
       "correct owner with the wrong epoch is a fence failure", FenceOwnerOnly, "stale-fence-accepted"),
    _p("fence-ignores-expiry", "fence", "§6 step 7", "an expired claim fails the fence (claim-expired)",
       FenceIgnoresExpiry, "stale-fence-accepted"),
    _p("fence-outside-commit", "fence", "§6 steps 6-9",
       "for a strictly fenced backend, fence, revision and write are one serialized commit boundary",
       FenceOutsideCommit, "stale-fence-accepted", "revision-chain-broken", "unaccepted-revision",
       "ledger-bytes-mismatch"),
    _p("revision-unchecked", "revision", "§6 step 8", "the durable revision MUST equal expected_revision",
       RevisionUnchecked, "revision-chain-broken", "false-revision-conflict"),
    _p("outcome-in-memory", "outcome-durable", "§6, §8",
       "a stored terminal outcome is durable and readable by operation id", OutcomeInMemory,
       "publication-outcome-lost", "final-outcome-missing", "retry-not-replayed", "operation-id-bound-twice"),
    _p("legacy-transition-unguarded", "legacy-transition", "§7",
       "legacy transition MUST refuse an active claimed item (active-claim-write-refused)",
       LegacyTransitionUnguarded, "legacy-write-over-active-claim"),
    _p("legacy-create-unguarded", "legacy-create", "§7",
       "legacy create MUST refuse an identity with claim history (claimed-item-write-refused)",
       LegacyCreateUnguarded, "legacy-create-over-claim-history"),
    _p("free-form-messages", "envelope-exact", "§8",
       "stable messages are part of version 1; no free-form prose for the specified codes", FreeFormMessages,
       "malformed-envelope"),
    _p("fence-grammar-unchecked", "canonical-request", "§5, §6 step 2",
       "a request with a noncanonical value (a fence owner outside the grammar, an epoch of 2^64) is exit 2 "
       "invalid-request before any decision", FenceGrammarUnchecked, "noncanonical-request-decided"),
    _p("floor-before-validation", "refusal-keeps-floor", "§6 steps 5-6",
       "a refusal that stops before the floor step (binding, schema, idempotency, digest, validation) changes "
       "no floor (vectors.md §5.1 rule 8)", FloorBeforeValidation, "floor-moved-by-refusal"),
)}
# the check-then-act class (chaos.testing.cta_mutants): a decision's atomicity broken, not a rule inside it
RED_TEAM.update((row[0], _p(*row[:5], *row[5])) for row in CHECK_THEN_ACT)


def _opener(cls):
    def open_backend(spec, clock, hooks):
        return cls(spec, clock, hooks)
    return open_backend


for _bug in RED_TEAM.values():   # open_<name>: one factory per planted bug (chaos run / chaos backend --factory)
    globals().setdefault(f"open_{_bug.name.replace('-', '_')}", _opener(_bug.cls))


def red_team_table() -> str:
    """``RED_TEAM`` as the table docs/mutants.md prints (a test keeps them equal)."""
    rows = ["| planted bug (`open_<name>`) | rule | contract | the MUST it breaks | anomaly types that name it |",
            "|---|---|---|---|---|"]
    for b in RED_TEAM.values():
        rows.append(f"| `{b.name}` | `{b.rule}` | {b.section} | {b.must} | {', '.join(f'`{n}`' for n in b.names)} |")
    return "\n".join(rows)
