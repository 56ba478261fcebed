"""Check-then-act mutants: the decision is right, the transaction is not.

Every mutant of ``chaos.testing.mutants`` breaks one rule *inside* the
engine's write transaction, so the transaction itself stays atomic. These
break the atomicity: the decision (floor, record, witness / CAS tuple /
fence and revision, the legacy refusal) is taken under the store's write
lock exactly as the engine takes it, the transaction commits (the floor
only), and the write the decision called for is done afterwards, in a
second transaction that re-checks nothing. In the gap a rival's whole call
can run. Three shapes per decision, the ones backend authors write:

* ``split-<decision>``: the write right after the lock is let go;
* ``split-<decision>-sleep``: the same, with a few milliseconds between
  (an audit append, a log flush, a network hop to the writer);
* ``split-<decision>-reread``: the record is re-read outside the lock
  before the write ("carry the freshest high-water mark forward") and the
  decision is written on top of it, still unchecked.

Decisions: ``acquire``, ``renew``, ``release``, ``publish`` (fence and
revision checked, ledger bytes and the stored outcome written later: the
"split publish") and ``legacy-transition`` (the active-claim refusal
checked, the write - which reports the record it wrote over - done later).

The gap is where ``chaos.faults.lockfreeze`` stops a call (right after it
ends a write transaction): the racers' frozen steps (``workloads.races``:
the last steps of ``publish-after-release``, ``race:twin-publish`` and
``legacy-writes``, the renew and the release of ``stale-expiry``) send the
rival once the freeze landed and let the frozen call go on once the rival
has its reply, so every shape is reached on every path that takes POSIX
record locks; the twin steps send two calls at once (timed), which reaches
the ``-sleep`` shape by itself. docs/mutants.md lists the episode per bug.

``CHECK_THEN_ACT`` lists them for ``chaos.testing.mutants.RED_TEAM`` (which
gives each its ``open_<name>`` factory, so both paths load them: the Python
class and the same class behind the contract CLI).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from backends.api import ClaimRecord, Clock, Hooks
from backends.contract import empty_record, legacy_success, read_back
from backends.contract.envelopes import SURFACE
from backends.sqlite import SqliteBackend
from chaos.testing.mutants_base import StoreView, TxnView

#: the "short sleep" of the -sleep shape (the issue's split publish dropped the lock "for a few ms")
GAP_S = 0.005
DECISIONS = ("acquire", "renew", "release", "publish", "legacy-transition")


class _DeferredWrites(TxnView):
    """The check's transaction: claim, ledger and outcome writes are kept back
    (the floor is written: time is persisted with the decision)."""

    def __init__(self, inner, owner, pending: list):
        super().__init__(inner, owner)
        self.pending = pending

    def put_claim(self, rec) -> None:
        self.pending.append(("claim", rec))

    def put_ledger(self, ns, item_id, data) -> None:
        self.pending.append(("ledger", (ns, item_id, data)))

    def put_outcome(self, outcome) -> None:
        self.pending.append(("outcome", outcome))


class _SplitStore(StoreView):
    """A store whose write transactions, during a split decision, commit the
    check and do the write after the lock is released (the bug)."""

    @contextmanager
    def transaction(self, write: bool):
        if not (write and self.owner.splitting()):
            with self.inner.transaction(write) as txn:
                yield txn
            return
        pending: list = []
        with self.inner.transaction(True) as txn:
            yield _DeferredWrites(txn, self.owner, pending)
        if pending:                       # the lock is gone: act on the decision taken under it
            self.owner.act(pending)


class CheckThenAct(SqliteBackend):
    """The SQLite backend with one decision split into check and act."""

    decision: str = ""
    gap_s: float = 0.0
    reread: bool = False

    def __init__(self, spec: dict, clock: Clock, hooks: Hooks):
        super().__init__(spec, clock, hooks)
        self.current = threading.local()
        self.store = _SplitStore(self.store, self, TxnView)

    def call(self, op, request):
        self.current.op = op
        try:
            return super().call(op, request)
        finally:
            self.current.op = None

    def splitting(self) -> bool:
        return getattr(self.current, "op", None) == self.decision

    def act(self, pending: list) -> None:
        """The write, outside the lock the decision was taken under."""
        if self.gap_s:
            time.sleep(self.gap_s)
        fresh = {}
        if self.reread:                   # outside the lock: the freshest record, to write on top of
            with self.store.inner.transaction(write=False) as txn:
                for kind, what in pending:
                    if kind == "claim":
                        fresh[(what.ledger_namespace, what.item_id)] = txn.get_claim(what.ledger_namespace,
                                                                                     what.item_id)
        with self.store.inner.transaction(write=True) as txn:
            for kind, what in pending:
                if kind == "claim":
                    now = fresh.get((what.ledger_namespace, what.item_id))
                    if now is not None and now.last_epoch > what.last_epoch:   # "never lower the high-water mark"
                        what = ClaimRecord(what.ledger_namespace, what.item_id, now.last_epoch, what.active)
                    txn.put_claim(what)
                elif kind == "ledger":
                    txn.put_ledger(*what)
                else:
                    txn.put_outcome(what)

    def _legacy(self, op, req):
        """The legacy refusal is decided under the lock; the permitted write
        happens after it, and its reply reports the record it wrote over."""
        reply = super()._legacy(op, req)
        if op != self.decision or reply.exit != 0:
            return reply
        if self.gap_s:
            time.sleep(self.gap_s)
        ns, item = req.ledger_namespace, req.item_id
        if self.reread:
            with self.store.inner.transaction(write=False) as txn:
                txn.get_claim(ns, item)
        with self.store.inner.transaction(write=True) as txn:
            now = self._persist_floor(txn, ns)
            rec = txn.get_claim(ns, item)
        return legacy_success(SURFACE[op][1], {"read_back": read_back(rec or empty_record(ns, item), now)})


def _variant(decision: str, shape: str) -> type:
    title = "".join(p.capitalize() for p in decision.split("-"))
    attrs = {"decision": decision, "gap_s": GAP_S if shape == "sleep" else 0.0, "reread": shape == "reread",
             "__doc__": f"``{_name(decision, shape)}``: {decision} checked under the lock; {WHAT[shape]}."}
    return type(f"Split{title}{shape.capitalize()}", (CheckThenAct,), attrs)


def _name(decision: str, shape: str) -> str:
    return f"split-{decision}" + (f"-{shape}" if shape else "")


WHAT = {"": "the write right after the lock is let go",
        "sleep": f"the write {GAP_S * 1000:g} ms after the lock is let go",
        "reread": "the write on top of a re-read outside the lock"}

#: decision -> (rule, contract section, the MUST, anomaly types that name it), for RED_TEAM
BROKEN = {
    "acquire": ("acquire-witness", "§5 Acquire 1, §4",
                "the witness is compared and the claim written in one serialized decision: of two acquires with "
                "one witness, one is claim-conflict",
                ("witness-mismatch-accepted", "two-owners-one-epoch", "overlapping-leases")),
    "renew": ("renew-release-cas", "§5 Renew",
              "the CAS tuple is compared and the renewed expiry written in one serialized decision",
              ("stale-expiry-accepted",)),
    "release": ("renew-release-cas", "§5 Release",
                "the CAS tuple is compared and the claim cleared in one serialized decision",
                ("stale-expiry-accepted",)),
    "publish": ("revision", "§6 steps 6-9",
                "fence, revision and write are one serialized commit boundary: of two publishes on one expected "
                "revision, one is ledger-revision-conflict", ("revision-chain-broken", "stale-fence-accepted")),
    "legacy-transition": ("legacy-transition", "§7",
                          "the active-claim refusal and the legacy write are one serialized decision",
                          ("legacy-write-over-active-claim",)),
}

#: (name, rule, section, must, class, anomaly types) per planted check-then-act bug
CHECK_THEN_ACT = tuple(
    (_name(d, shape), rule, section, f"{must} (planted: {WHAT[shape]})", _variant(d, shape), names)
    for d, (rule, section, must, names) in BROKEN.items() for shape in ("", "sleep", "reread"))
