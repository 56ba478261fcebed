"""The check-then-act red team (``chaos.testing.cta_mutants``) pinned at unit
level: the interleaving each racer episode's frozen step drives
(``workloads.races``: publish-after-release, stale-expiry, race:twin-publish,
legacy-writes) is replayed against the mutant exactly as the write-release
freeze makes it (the first call stopped right after it ends a write
transaction, the rival's calls run to their replies, then the first goes on);
the checkers name each bug by its own rule, and the correct SQLite backend
under the very same interleaving stays valid. Two backends over one file
stand for the two worker processes."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from backends.api import FixedClock, Hooks
from backends.registry import open_backend
from checkers import run_checkers
from checkers.history import classify
from chaos.testing.cta_mutants import CHECK_THEN_ACT, DECISIONS
from chaos.testing.mutants import RED_TEAM
from chaos.testing.mutants_base import StoreView
from workloads.claims import ClaimsConfig, claims_workload
from workloads.items import publish_request, revision_of

T0 = 1_894_352_400_000
LEASE_MS = 10_000
CORRECT = "backends.sqlite:open_backend"
WORLD = claims_workload(1, ClaimsConfig())[1]
(NS, ITEM), (_, SIDE), _ = WORLD.race_tuples[0]


class FreezeAfterWrite:
    """The innermost store of a backend, stopping its caller right after the
    first write transaction it ends once armed (what ``chaos.faults.lockfreeze``
    does to a process after its F_UNLCK)."""

    def __init__(self, inner):
        self.inner = inner
        self.armed = False
        self.frozen, self.go = threading.Event(), threading.Event()

    @contextmanager
    def transaction(self, write: bool):
        with self.inner.transaction(write) as txn:
            yield txn
        if write and self.armed:
            self.armed = False
            self.frozen.set()
            assert self.go.wait(30), "the rival never finished"

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _freezable(backend) -> FreezeAfterWrite:
    holder, attr = backend, "store"
    while isinstance(getattr(holder, attr), StoreView):   # a mutant's view: freeze under it, at the real store
        holder, attr = getattr(holder, attr), "inner"
    freeze = FreezeAfterWrite(getattr(holder, attr))
    setattr(holder, attr, freeze)
    return freeze


class Interleaving:
    """Two backends (processes 0 and 1) over one SQLite file, and the history
    of their calls in the checkers' format."""

    def __init__(self, tmp_path, factory: str):
        spec = {"backend": "python", "factory": factory, "path": str(tmp_path / "c.db"),
                "namespaces": list(WORLD.namespaces)}
        self.clocks = (FixedClock(T0), FixedClock(T0))
        self.backends = tuple(open_backend(dict(spec), c, Hooks()) for c in self.clocks)
        self.backends[0].store.seed(WORLD.durable())
        self.freeze = _freezable(self.backends[0])
        self.history: list[dict] = []

    def close(self) -> None:
        for b in self.backends:
            b.close()

    def _record(self, **event) -> None:
        self.history.append(dict(event, index=len(self.history), time=len(self.history) * 1_000_000))

    def call(self, p: int, f: str, value: dict, at: int) -> dict:
        self._record(process=p, type="invoke", f=f, value=value)
        return self._done(p, f, self._reply(p, f, value, at))

    def _reply(self, p, f, value, at):
        self.clocks[p].set(at)
        return self.backends[p].call(f, value)

    def _done(self, p, f, reply) -> dict:
        self._record(process=p, type=classify(reply.exit, reply.envelope), f=f, value=reply.to_json())
        return reply.envelope

    def frozen(self, f: str, value: dict, at: int, rivals) -> dict:
        """Process 0's call frozen after its first write transaction while
        ``rivals()`` (process 1's calls) run, then let go."""
        self._record(process=0, type="invoke", f=f, value=value)
        self.freeze.armed = True
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("reply", self._reply(0, f, value, at)))
        t.start()
        assert self.freeze.frozen.wait(30), "the frozen call ended no write transaction"
        rivals()
        self.freeze.go.set()
        t.join(30)
        return self._done(0, f, out["reply"])

    def verdict(self) -> dict:
        final = self.backends[1].store.export_durable()
        history = self.history + [{"index": len(self.history), "process": "nemesis", "type": "info",
                                   "f": "final-state", "time": len(self.history) * 1_000_000,
                                   "value": {"durable": final}}]
        ctx = {"capabilities": self.backends[1].call("capabilities", {}).envelope, "lease_ms": LEASE_MS,
               "tuples": [list(t) for t in WORLD.tuples], "initial_durable": WORLD.durable(), "backend": "sqlite",
               "workload": "claims"}
        return run_checkers(history, ctx)


def owner(p: int) -> str:
    return f"racer-p{p}"


def acquire(p: int, record: dict, item: str = ITEM) -> dict:
    return {"ledger_namespace": NS, "item_id": item, "owner_id": owner(p), "lease_duration_ms": LEASE_MS,
            "expected": {"last_epoch": record["last_epoch"], "active": record["active"]}}


def cas(claim: dict, renew: bool) -> dict:
    req = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": claim["owner_id"], "epoch": claim["epoch"],
           "expected_expires_at": claim["expires_at"]}
    return dict(req, lease_duration_ms=LEASE_MS) if renew else req


def read(run: Interleaving, p: int, item: str = ITEM) -> dict:
    return run.call(p, "read", {"ledger_namespace": NS, "item_id": item}, T0)["result"]["read_back"]


def hold(run: Interleaving) -> dict:
    return run.call(0, "acquire", acquire(0, read(run, 0)), T0)["result"]["claim"]


def publish(p: int, op_id: str, fence_owner: str, epoch: str) -> dict:
    fence = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": fence_owner, "epoch": epoch}
    return publish_request(op_id, NS, ITEM, revision_of(WORLD.seed_items[(NS, ITEM)]), fence, owner(p))


# --------------------------------------------------------------------------- the episodes' interleavings


def frozen_acquire(run):
    """publish-after-release's frozen step: the claim taken over at its expiry by both, with one witness,
    the rival inside the gap."""
    a = hold(run)
    witness, expires = {"last_epoch": a["epoch"], "active": a}, T0 + LEASE_MS
    return [run.frozen("acquire", acquire(0, witness), expires,
                       lambda: run.call(1, "acquire", acquire(1, witness), expires))]


def frozen_renew(run):
    """stale-expiry, first step: a's renew frozen, b releases with the same tuple."""
    a = hold(run)
    return [run.frozen("renew", cas(a, True), T0 + 1, lambda: run.call(1, "release", cas(a, False), T0 + 1))]


def frozen_release(run):
    """stale-expiry, last step: a's claim as the first step's renew left it; a's release
    frozen, b renews with the same tuple."""
    a = run.call(0, "renew", cas(hold(run), True), T0 + 1)["result"]["claim"]
    return [run.frozen("release", cas(a, False), T0 + 2, lambda: run.call(1, "renew", cas(a, True), T0 + 2))]


def frozen_publish_rival_first(run):
    """race:twin-publish's frozen step: a publishes, frozen; b publishes under the same fence on the
    revision the pair knew, under its own operation id."""
    a = hold(run)
    return [run.frozen("publish", publish(0, "pub-a", a["owner_id"], a["epoch"]), T0 + 1,
                       lambda: run.call(1, "publish", publish(1, "pub-b", a["owner_id"], a["epoch"]), T0 + 1))]


def frozen_legacy(run):
    """legacy-writes, last step: the legacy transition of the free side item frozen, a rival acquires it."""
    rec = read(run, 1, SIDE)
    legacy = {"ledger_namespace": NS, "item_id": SIDE}
    return [run.frozen("legacy-transition", legacy, T0, lambda: run.call(1, "acquire", acquire(1, rec, SIDE), T0))]


#: decision -> (the episode step that reaches its gap, the anomaly type of its own rule)
EPISODE = {
    "acquire": (frozen_acquire, "witness-mismatch-accepted"),
    "renew": (frozen_renew, "stale-expiry-accepted"),
    "release": (frozen_release, "stale-expiry-accepted"),
    "publish": (frozen_publish_rival_first, "revision-chain-broken"),
    "legacy-transition": (frozen_legacy, "legacy-write-over-active-claim"),
}


def anomaly_types(verdict: dict) -> set:
    return {a["type"] for r in verdict["checkers"].values() if r["valid"] is False for a in r["anomalies"]}


@pytest.mark.parametrize("name", [row[0] for row in CHECK_THEN_ACT])
def test_each_split_decision_is_caught_by_its_episode_and_named_by_its_own_rule(name, tmp_path):
    bug = RED_TEAM[name]
    decision = next(d for d in DECISIONS if name in (f"split-{d}", f"split-{d}-sleep", f"split-{d}-reread"))
    episode, own = EPISODE[decision]
    run = Interleaving(tmp_path, bug.factory)
    try:
        episode(run)
        verdict = run.verdict()
    finally:
        run.close()
    assert verdict["valid"] is False
    assert own in anomaly_types(verdict) and own in bug.names, anomaly_types(verdict)


@pytest.mark.parametrize("decision", DECISIONS)
def test_the_correct_backend_under_the_same_interleaving_refuses_the_rival_and_stays_valid(decision, tmp_path):
    run = Interleaving(tmp_path, CORRECT)
    try:
        (first,) = EPISODE[decision][0](run)
        verdict = run.verdict()
        rival = run.history[-2]      # the rival's last completion, just before the frozen call's own
    finally:
        run.close()
    assert first.get("ok") is True or first.get("result") is not None, first
    assert verdict["valid"] is True, {k: v["anomalies"][:2] for k, v in verdict["checkers"].items()
                                      if v["valid"] is not True}
    if decision != "legacy-transition":   # a permitted legacy write over a free item lets the acquire through
        assert rival["type"] == "fail", rival


def test_every_decision_has_three_shapes_registered_in_the_red_team():
    names = {row[0] for row in CHECK_THEN_ACT}
    assert names == {f"split-{d}{s}" for d in DECISIONS for s in ("", "-sleep", "-reread")}
    assert names <= set(RED_TEAM)
