"""Racer pairs: two client threads that drive one race item as fast as the
backend answers, through a seeded rotation of adversarial *episodes*.

A pair owns a namespace of its own (``Universe.race_tuples[k]``: the race
item and a side item), so its exact clock pins never move the honest agents'
floors. Roles ``a`` and ``b`` are the pair's two threads; their owners are
``<prefix>-p<process>`` like every agent's, so a role whose op ended ``info``
acts on under a new owner.

Every episode starts with a prologue: ``a`` acquires the race item with its
exact record as the witness (every claim reply shows the record, so the pair
knows it; after an ``info`` it reads the item first), taking whatever claim
is left over (the previous episode's, say) over with the acquire pinned at
that claim's ``expires_at``, the first instant it is expired. No episode
releases at its end: the next prologue's takeover is cheaper than a release
and a fresh acquire, so episodes run back to back as fast as the backend
answers.

Then the episode's steps. A step is one op per role, dispatched at
the same instant, and the next step starts when every op of the step has
completed (``E`` is a's ``expires_at``, ``R`` the item's known revision):

=========================  ====================================================
race:takeover-vs-publish   a publishes (fence a) ∥ b takes over (pinned at E);
                           then b publishes
race:two-owners            b takes over (pinned at E); then a publishes
                           (fence a) ∥ b publishes (fence b), both on R
race:publish-vs-release    a publishes ∥ b releases a's claim
race:twin-publish          a ∥ b publish under a's fence, on one expected
                           revision, with their own operation ids; then a's
                           publish frozen like frozen-publish while b publishes
                           the same way (a's fence, the revision the pair knew
                           before a's publish); a goes on once b has its reply
probe-<op>@<d>             renew, release or publish by a, or takeover by b,
                           decided at exactly E-1, E or E+1 ms (d = -1, 0, +1)
fence-<dimension>          a publishes with a fence whose namespace, item,
                           owner (b's) or epoch (a's other one) is wrong;
                           ``publish-after-release``: after a's release
                           (meanwhile b acquires the free item with the
                           stale witness a's hold used); then a ∥ b acquire
                           the free item with one and the same witness; then
                           a's takeover of the winner's claim (at its expiry)
                           is frozen at the end of its write transaction while
                           b takes it over with the same witness
replay-after-ok / -fail    the identical publish twice (first ok, or first a
                           stored fence rejection)
reuse-bytes / -revision /  a's ok publish, then its operation_id with other
-item                      bytes, another expected revision, another item
stale-witness              b acquires with the witness a's acquire used; then
                           again, decided at E (the claim expired)
stale-expiry               a renews, frozen at the end of its write transaction
                           while b releases with the same CAS tuple; then a
                           renews again with the old expiry; then a releases,
                           frozen, while b renews with the same tuple
stale-revision             a publishes with an older (or never-seen) revision,
                           decided 1 ms into a's lease
unbound-namespace          read, acquire and publish on a never-provisioned
                           namespace; the capabilities again
frozen-publish             a's publish is SIGSTOPped inside the call (the
                           process serving it: the worker host, or a black-box
                           program's per-call CLI process) right after it ends a
                           write transaction (``chaos.faults.lockfreeze``; a
                           program that takes no record locks: at a seeded point
                           of its work); meanwhile b takes the item over (pinned
                           at E); a is SIGCONTed once b has its reply; then b
                           publishes
killed-publish / -renew    a's call is SIGKILLed at a seeded point inside it
legacy-writes              b's legacy transition and legacy create of a's held
                           item (both must be refused, §7), while a reads the
                           side item; then b's legacy transition of the (free
                           or expired) side item, frozen, while a acquires it
bad-digest                 a publish whose candidate_sha256 is not the digest
                           of its bytes
incomplete-retry           a's publish, then its operation id alone (§6: a
                           retry carries the complete request)
invalid-candidate          a publish whose candidate is another item's bytes
epoch-exhaustion           a takes the pair's exhausted item (seeded one short
                           of the high-water mark), b takes it over at E
noncanonical-requests      a publishes with a fence owner outside the grammar,
                           an epoch of 2^64, a 129-character owner; then b
                           acquires and a renews with such values (each must
                           be invalid-request)
refusals-keep-floor        a's publishes refused before the floor step
                           (invalid candidate, wrong digest, noncanonical fence),
                           each pinned days ahead and read right after
=========================  ====================================================

An op of a step may carry ``delay_ms`` (after the step starts) and a role's
ops of one step run one after another; an in-call fault is the op's
``fault``: ``{"kind": "freeze" | "kill", "at": u, "hold_ms"}``, where the
worker turns ``u`` (seeded, in [0, 1)) into a point of the call's work
(``chaos.worker.Slot``, ``chaos.faults.incall``) and records what it did with
the completion.

Exact time: a probe op carries ``clock_ms`` (the instant the backend must
decide at); the worker pins its backend's clock to it for that one call (an
in-process backend's host clock, a black-box program's libfaketime absolute
time) and the history records it on the invoke and the completion. Each
reply's ``observed_at`` then shows whether the decision landed exactly there
(``workloads.coverage``). Within the pair's namespace, time moves only with
real time and the pins, so the floor is below ``E - 1`` when a probe is sent
and the pinned instant is the decision time.

Each op carries ``intent`` (``<episode>:<step label>``), which the coverage
gate reads. The rotation is a seeded permutation of ``cfg.episodes`` per block
of episodes (``Stream(seed, ("race", block))``), the pairs taking turns
through it, so every kind runs once per block (an episode an abort cut short
runs once more at once, unless its own in-call kill did; up to
``UNDECIDED_RERUNS`` times, after a growing pause, while a fault takes a reply
of its own steps or the store answers a step that it could not decide; the
two allowances are counted apart) and the order is a pure function of the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from backends.contract.values import parse_instant
from workloads.generator import MS, PENDING, Context
from workloads.items import b64, candidate, publish_request, revision_of, stored_revision
from workloads.random import Stream

ROLES = ("a", "b")
PROBE_OPS = ("renew", "release", "publish", "takeover")
#: replies that decided nothing (contract §4, §8: the store or its floor unavailable; the coverage gate's
#: too), and how often an episode they, or a fault that took one of its replies, cut short may rerun
NO_DECISION = frozenset(("clock-floor-persistence-failed", "claim-store-unavailable"))
UNDECIDED_RERUNS = 3
UNDECIDED_PAUSE_MS = 700   # and the pause before such a rerun grows by this much each time
PROBE_OFFSETS = (-1, 0, 1)


def probe_name(op: str, d: int) -> str:
    return f"probe-{op}@{'+' if d > 0 else ''}{d}"


EPISODES = (
    ("race:takeover-vs-publish", "race:two-owners", "race:publish-vs-release")
    + tuple(probe_name(op, d) for op in PROBE_OPS for d in PROBE_OFFSETS)
    + ("fence-namespace", "fence-item", "fence-owner", "fence-epoch", "publish-after-release",
       "replay-after-ok", "replay-after-fail", "reuse-bytes", "reuse-revision", "reuse-item",
       "stale-witness", "stale-expiry", "stale-revision", "unbound-namespace",
       "frozen-publish", "killed-publish", "killed-renew",
       "legacy-writes", "bad-digest", "incomplete-retry", "invalid-candidate", "epoch-exhaustion",
       "noncanonical-requests", "refusals-keep-floor",
       "race:twin-publish")
)

#: what an episode needs of the backend beyond its public commands (``chaos.sut.abilities`` needs):
#: a run whose backend lacks one leaves the episode out up front and says why (``chaos.runner``)
EPISODE_NEEDS = {
    "epoch-exhaustion": ("seed=store|admin",),   # a claim record seeded one short of the high-water mark
    "legacy-writes": ("legacy-writes", "freeze-call"),   # its last step freezes (check-then-act legacy write)
    "frozen-publish": ("freeze-call",),
    "publish-after-release": ("freeze-call",),  # its last step freezes (the deterministic twin acquire)
    "race:twin-publish": ("freeze-call",),
    "stale-expiry": ("freeze-call",),   # its renew and its release are frozen, each with a rival
    "killed-publish": ("kill-call",),
    "killed-renew": ("kill-call",),
}


#: the episodes of the lease's core promise (one owner at a time, §4-§5; a stale owner is fenced
#: out, §6): the first block of every rotation starts with them, so a short run (a 4-s CI gate)
#: tests them whatever its seed (seeded, a two-owner bug slipped through 3 of 10 such runs)
CORE_EPISODES = (probe_name("takeover", -1), probe_name("publish", 0), "race:two-owners")


def episode_of(seed: int, pair: int, n: int, kinds: tuple, pairs: int = 1) -> str:
    """The ``n``-th episode of ``pair`` (of ``pairs``): the pairs take turns
    through one sequence whose blocks are seeded permutations of ``kinds``, so
    together they run every kind once per block; block 0 puts the
    ``CORE_EPISODES`` first."""
    block, i = divmod(n * pairs + pair, len(kinds))
    return _block_order(seed, block, tuple(kinds))[i]


@lru_cache(maxsize=4096)   # the generator asks for an episode at every op it considers
def _block_order(seed: int, block: int, kinds: tuple) -> tuple:
    """Block ``block`` of ``episode_of``'s sequence: a seeded permutation of ``kinds``."""
    s = Stream(seed, ("race", block))
    core = [k for k in kinds if k in CORE_EPISODES] if block == 0 else []
    rest = [k for k in kinds if k not in core]
    for order in (core, rest):
        for j in range(len(order) - 1, 0, -1):  # Fisher-Yates
            k, s = s.randint(0, j)
            order[j], order[k] = order[k], order[j]
    return tuple(core + rest)


@dataclass(frozen=True)
class Facts:
    """What the pair knows about its race item (from definite replies only)."""

    record: dict | None = None     # {last_epoch, active} as the last claim reply showed it; None = unknown
    witness: dict | None = None    # the record the prologue's acquire used
    hold: dict | None = None       # a's claim from the prologue (kept after a loses it)
    claims: tuple = ()             # ((role, claim), ...): claims the pair holds, as the backend returned them
    rev: str | None = None         # the race item's revision, as last learned
    old_rev: str | None = None     # a revision it had before
    lost: dict | None = None       # a publish on the race item that ended info: did it commit? (rev unsure)
    first: dict | None = None      # the episode's first publish request and its completion type
    first_type: str | None = None
    other: dict | None = None      # the last read_back of another tuple (the exhausted item) in this episode
    other_claim: dict | None = None  # a's claim on that tuple
    released: bool = False         # a release of the race item succeeded in this episode
    aborted: bool = False
    undecided: bool = False        # the abort was a reply that decided nothing (the store or its floor unavailable)
    faulted: bool = False          # a fault (a kill, a lost reply, an fsync error) took a reply of the episode's own steps
    taken: bool = False            # a fault took a reply of any step (the prologue's too)
    killed: bool = False           # the episode's own in-call kill took a reply: cut short by design

    def claim(self, role: str) -> dict | None:
        return dict(self.claims).get(role)

    def holding(self, role: str, claim: dict | None) -> "Facts":
        table = dict(self.claims)
        if claim is None:
            table.pop(role, None)
        else:
            table[role] = claim
        return replace(self, claims=tuple(sorted(table.items())))

    def next_episode(self) -> "Facts":
        """What carries over: the item's record and revisions."""
        return Facts(record=self.record, rev=self.rev, old_rev=self.old_rev, lost=self.lost)


@dataclass(frozen=True)
class RacePair:
    """One pair's state. ``ClaimsWorkload`` asks it for ops of its threads and
    feeds it their completions (it is a part of that generator, not one on
    its own: the pair needs the run's universe and configuration)."""

    pair: int
    threads: tuple                 # (thread of a, thread of b)
    of: int = 1                    # how many pairs take turns through the episode sequence
    n: int = 0                     # episode number
    tries: int = 0                 # reruns of episode n so far: aborts cut its earlier runs short
    plain_reruns: int = 0          # those of them a prologue's fault or a decided refusal earned (one at most)
    step: int = 0                  # 0 read (when the record is unknown), 1 hold, 2.. the episode's steps
    todo: tuple = ()               # ((role, op), ...) of the current step, not yet dispatched
    inflight: tuple = ()           # ((role, op), ...) dispatched, not yet completed
    started: bool = False          # the current step's ops were built
    facts: Facts = Facts()
    at: int = 0                    # the current step is due at this time
    exercised: tuple = ()          # kinds an episode of which ended other than by faults taking its prologue
    redo: str | None = None        # past the time limit: a kind the pair runs again, out of the rotation's order

    @property
    def rerun_key(self) -> tuple:
        """The seed streams' key of this run of the episode (a first rerun keeps its old key)."""
        return () if not self.tries else ("again",) if self.tries == 1 else ("again", self.tries)

    def kind(self, seed: int, cfg) -> str:
        return self.redo or episode_of(seed, self.pair, self.n, cfg.episodes, self.of)

    @property
    def idle(self) -> bool:
        return not (self.started or self.inflight)

    def settled(self, ctx: Context, w) -> "RacePair":
        """The pair as its next op would find it: between episodes, an ended
        episode counts once the pair has moved past it, which ``_build`` does
        lazily (so ``n`` and ``exercised`` are current)."""
        return self._build(ctx, w) if self.idle else self

    def in_first_pass(self, cfg) -> bool:
        return not self.redo and self.n * self.of + self.pair < len(cfg.episodes)

    def again(self, ctx: Context, w, kind: str) -> "RacePair":
        """This idle pair running ``kind`` next, out of the rotation's order."""
        return replace(self.settled(ctx, w), redo=kind, started=False, todo=(), step=0)

    def _ended(self, kind: str, reached: bool, **changes) -> "RacePair":
        done = self.exercised + ((kind,) if reached and kind not in self.exercised else ())
        changes.setdefault("facts", self.facts.next_episode())
        return replace(self, n=self.n + 1, tries=0, plain_reruns=0, step=0, exercised=done, redo=None, **changes)

    def role_of(self, thread) -> str | None:
        return dict(zip(self.threads, ROLES)).get(thread)

    def op(self, ctx: Context, w):
        """``(op, new_pair)`` for one of the pair's free threads, or PENDING."""
        pair = self
        if not pair.started:
            if pair.inflight:
                return PENDING
            pair = pair._build(ctx, w)
        busy = {r for r, _ in pair.inflight}
        for i, (role, op) in enumerate(pair.todo):
            if role in busy:   # a role's ops of one step run one after another, in order
                continue
            busy.add(role)
            t = pair.threads[ROLES.index(role)]
            if t not in ctx.free:
                continue
            at = max(ctx.time, pair.at + int(op.get("delay_ms", 0)) * MS)
            full = dict({k: v for k, v in op.items() if k != "delay_ms"}, process=ctx.process_of[t], type="invoke",
                        time=at)
            return full, replace(pair, todo=pair.todo[:i] + pair.todo[i + 1:], inflight=pair.inflight + ((role, full),))
        return PENDING

    def update(self, ctx: Context, w, event: dict) -> "RacePair":
        if event.get("type") == "invoke":
            return self
        role = self.role_of(ctx.thread_of(event.get("process")))
        mine = [op for r, op in self.inflight if r == role]
        if not mine:
            return self
        facts = _learn(self, w, role, mine[0], event)
        pair = replace(self, facts=facts, inflight=tuple((r, op) for r, op in self.inflight if r != role))
        if pair.inflight or pair.todo:
            return pair
        if facts.aborted:
            # the same episode once more, then the next one, after a short seeded pause (a store
            # that is down is not hammered): a fault that takes one reply (a kill, a lost reply, a
            # restart) would otherwise void the rotation's only run of that kind in a short run of a
            # slow program (the red team's CLI path: the one takeover probe, the one stale-expiry renew)
            # A step the store could not decide (unavailable during an fsync fault or a restart), or
            # an aimed step whose reply a fault took, says nothing of the episode, so it may run up to
            # UNDECIDED_RERUNS times (epoch-wraps, CLI seed 1: both runs of the one epoch-exhaustion
            # episode met claim-store-unavailable; fence-outside-commit, CLI seed 2: an fsync error took
            # the first frozen publish's rival's reply, the kill nemesis the rerun's frozen publish).
            # A fault that took a prologue's reply, or a decided refusal (a lost prologue race), reruns
            # it once: the store is failing, and the next episode waits as well as a rerun would (every
            # reply taken by a 7-s fsync window spent four runs of one kind: incomplete-retry-replayed,
            # CLI seed 2, never reached its episode); the episode's own kill never reruns it.
            # The two allowances are counted apart: one spent does not spend the other (signed-epochs,
            # CLI seed 2: the kill nemesis took take-last-epoch's reply, an fsync error the rerun's
            # hold-takeover, and with one count between them there was no third run).
            backoff, _ = Stream(ctx.seed, ("race-backoff", self.pair, self.n) + self.rerun_key).randint(*w.cfg.backoff_ms)
            cut = facts.undecided or facts.faulted
            plain = self.plain_reruns + (not cut)
            again = not facts.killed and (self.tries - self.plain_reruns < UNDECIDED_RERUNS if cut else plain <= 1)
            if facts.undecided:   # an fsync window or a restart lasts seconds: wait some of it out
                backoff += UNDECIDED_PAUSE_MS * (self.tries + 1)
            elif facts.faulted and again:   # the first rerun at once (a kill's new process), later ones as above
                backoff += UNDECIDED_PAUSE_MS * self.tries
            elif facts.taken and again:
                # a prologue's one rerun waits like an undecided step: at once, it met the same fsync
                # window (0.6-1.8 s at a CLI run's scale) that took the first run's reply (candidate-
                # unvalidated, CLI seed 3: both hold-takeovers of the one invalid-candidate episode
                # ended exit 1 under EIO, and the planted bug was never met)
                backoff += UNDECIDED_PAUSE_MS * (self.tries + 1)
            if not again:
                # only faults' ending leaves the kind untested: a decided refusal of the prologue is the
                # backend's answer, and running it again would only hear it again (expiry-inclusive, CLI
                # seed 2: every hold-takeover pinned at E refused claim-held, redone for 45 s)
                reached = self.step >= 2 or not (facts.taken or facts.undecided)
                return pair._ended(self.kind(ctx.seed, w.cfg), reached, started=False, at=ctx.time + backoff * MS)
            return replace(pair, tries=self.tries + 1, plain_reruns=plain, step=0, started=False,
                           facts=facts.next_episode(), at=ctx.time + backoff * MS)
        return replace(pair, step=pair.step + 1, started=False, at=ctx.time)

    def _build(self, ctx: Context, w) -> "RacePair":
        """The current step's ops, built from the facts; an empty step is skipped."""
        pair = self
        while True:
            kind = pair.kind(ctx.seed, w.cfg)
            body = STEPS[kind]
            if pair.step >= 2 + len(body):  # the episode is over; what the pair knows carries over
                pair = pair._ended(kind, True)
                continue
            x = Ctx(ctx, w, pair)
            if pair.step == 0:
                ops = [] if pair.facts.record is not None else [("a", x.read())]
                if pair.facts.lost:  # the revision is unsure until the lost publish's outcome is read
                    ops.append(("a", x.publication_read(pair.facts.lost)))
            elif pair.step == 1:
                ops = x.hold()
            else:
                ops = body[pair.step - 2](x)
            if ops is None:  # what the step needs is missing (an earlier step went otherwise): next episode
                pair = pair._ended(kind, True)   # the backend's answers left nothing to do: that was the test
                continue
            if ops:
                todo = tuple((role, dict(op, intent=f"{kind}:{op.pop('label')}")) for role, op in ops)
                return replace(pair, todo=todo, started=True)
            pair = replace(pair, step=pair.step + 1)


def _learn(pair: RacePair, w, role: str, sent: dict, ev: dict) -> Facts:
    """What a completion teaches the pair (definite replies only)."""
    f = pair.facts
    typ = ev.get("type")
    env = (ev.get("value") or {}).get("envelope") or {}
    result = env.get("result") or {}
    err = env.get("error") or {}
    name = sent.get("f")
    req = sent.get("value") or {}
    home = w.world.race_tuples[pair.pair][0]
    on_item = (req.get("ledger_namespace"), req.get("item_id")) == home
    if typ == "info":
        # the role's process is retired and the item's state is unknown: the next
        # episode reads it first and takes any leftover claim over (and reads a lost
        # publish's outcome: had it committed, the pair's revision is stale, and an episode's
        # aimed publish would meet a revision conflict instead of its path)
        lost = req if name == "publish" and on_item else f.lost
        killed = f.killed or (sent.get("fault") or {}).get("kind") == "kill"
        # a fault that took a reply of the episode's own steps (not the prologue's) voided its aim
        return replace(f.holding(role, None), record=None, aborted=True, lost=lost, killed=killed,
                       faulted=f.faulted or pair.step >= 2, taken=True)
    if typ == "fail" and err.get("code") in NO_DECISION:
        # the store decided nothing (its floor or itself unavailable: an fsync fault, a restart): the
        # episode's aim was not exercised, whichever step met it (legacy-create-unguarded, CLI seed 1:
        # both runs of the one legacy-writes episode were answered clock-floor-persistence-failed)
        return replace(f, aborted=True, undecided=True)
    if name == "publication-read" and f.lost and req.get("operation_id") == f.lost.get("operation_id"):
        if typ == "ok":
            rev = stored_revision(result)
            if rev and rev != f.rev:
                f = replace(f, old_rev=f.rev, rev=rev)
        return replace(f, lost=None)  # operation-not-found: it never committed
    if name == "publish" and f.first is None:
        f = replace(f, first=req, first_type=typ)
    if not on_item and typ == "ok" and name == "read":
        return replace(f, other=result.get("read_back"))
    if not on_item and typ == "ok" and name == "acquire" and role == "a":
        return replace(f, other_claim=result.get("claim"))
    if name in ("read", "acquire", "renew", "release") and on_item:
        rb = result.get("read_back") if typ == "ok" else err.get("details")
        if isinstance(rb, dict) and "last_epoch" in rb:  # every claim reply shows the exact record
            f = replace(f, record={"last_epoch": rb["last_epoch"], "active": rb.get("active")})
    if name == "read":
        return f if typ == "ok" or not on_item else replace(f, aborted=True)
    if name == "acquire" and on_item:
        if typ == "ok":
            claim = result.get("claim")
            f = f.holding(role, claim)
            if pair.step == 1:
                f = replace(f, hold=claim, witness=req.get("expected"))
            if role == "b":  # b took a's item over: a's claim is over
                f = f.holding("a", None)
            return f
        return replace(f, aborted=True) if pair.step == 1 else f
    if name == "renew" and typ == "ok":
        return f.holding(role, result.get("claim"))
    expired = err.get("code") == "claim-expired" or (err.get("details") or {}).get("reason") == "claim-expired"
    if expired and name in ("renew", "release", "publish"):
        return f.holding(role, None)  # the claim is over: the next prologue takes it over
    if name == "release" and typ == "ok":
        gone = (result.get("released_claim") or {}).get("epoch")
        for r, c in f.claims:
            if c.get("epoch") == gone:
                f = f.holding(r, None)
        return replace(f, released=on_item)
    if name == "publish":
        rev = None
        if typ == "ok":
            rev = result.get("committed_revision")
        elif err.get("code") == "ledger-revision-conflict":
            rev = (err.get("details") or {}).get("actual_revision")
        if rev and rev != f.rev and on_item:
            f = replace(f, old_rev=f.rev, rev=rev)
    return f


class Ctx:
    """Request builders for one step: the run context, the workload (its
    universe and configuration) and the pair as it is now."""

    def __init__(self, ctx: Context, w, pair: RacePair):
        self.ctx, self.w, self.pair, self.f = ctx, w, pair, pair.facts
        (self.ns, self.item), (_, self.side), (_, self.exhausted) = w.world.race_tuples[pair.pair]
        self.tup = {"ledger_namespace": self.ns, "item_id": self.item}

    def owner(self, role: str) -> str:
        t = self.pair.threads[ROLES.index(role)]
        return f"{self.w.cfg.owner_prefix}-p{self.ctx.process_of[t]}"

    def expires(self, claim: dict, d: int = 0) -> int:
        return parse_instant(claim["expires_at"]) + d

    def into_lease(self, claim: dict) -> int:
        """1 ms after ``claim`` was issued: a pin that decides inside the lease however slow the calls."""
        return parse_instant(claim["issued_at"]) + 1

    # ------------------------------------------------------------------ claim ops

    def read(self, tup: dict | None = None, label: str = "read") -> dict:
        return {"f": "read", "value": dict(tup or self.tup), "label": label}

    def publication_read(self, sent: dict, label: str = "read") -> dict:
        return {"f": "publication-read", "label": label,
                "value": {k: sent[k] for k in ("operation_id", "ledger_namespace", "item_id")}}

    def hold(self):
        """a acquires with the item's known record as witness; a leftover claim
        (the previous episode's, or anyone's) is taken over at exactly its
        expires_at, the first instant it is expired."""
        wit = self.f.record
        if wit is None:
            return None
        op = self.acquire("a", wit, label="hold")
        if wit.get("active"):
            op = dict(op, clock_ms=self.expires(wit["active"]), label="hold-takeover")
        return [("a", op)]

    def acquire(self, role: str, witness: dict, label: str, tup: dict | None = None, clock_ms: int | None = None) -> dict:
        req = dict(tup or self.tup, owner_id=self.owner(role), lease_duration_ms=self.w.cfg.race_lease_ms,
                   expected={"last_epoch": witness.get("last_epoch", "0"), "active": witness.get("active")})
        return self._op("acquire", req, label, clock_ms)

    def takeover(self, role: str, claim: dict, label: str, d: int = 0) -> dict:
        """Acquire over ``claim`` decided at exactly its expires_at + d ms."""
        return self.acquire(role, {"last_epoch": claim["epoch"], "active": claim}, label,
                            clock_ms=self.expires(claim, d))

    def renew(self, claim: dict, label: str, clock_ms: int | None = None, expires_at: str | None = None) -> dict:
        req = dict(self.tup, owner_id=claim["owner_id"], epoch=claim["epoch"],
                   expected_expires_at=expires_at or claim["expires_at"], lease_duration_ms=self.w.cfg.race_lease_ms)
        return self._op("renew", req, label, clock_ms)

    def release(self, claim: dict, label: str, clock_ms: int | None = None) -> dict:
        req = dict(self.tup, owner_id=claim["owner_id"], epoch=claim["epoch"], expected_expires_at=claim["expires_at"])
        return self._op("release", req, label, clock_ms)

    # ------------------------------------------------------------------ publication

    def publish(self, role: str, label: str, fence: dict | None = None, rev: str | None = None,
                item: str | None = None, clock_ms: int | None = None, ns: str | None = None) -> dict:
        """A fresh publish by ``role``: its own fence (``fence`` overrides members
        of it), the known revision unless ``rev``, a new operation id."""
        claim = self.f.hold or {}
        owner = self.owner(role)
        fence_full = {"ledger_namespace": self.ns, "item_id": self.item, "owner_id": claim.get("owner_id", owner),
                      "epoch": claim.get("epoch", "1"), **(fence or {})}
        op_id = f"pub_{owner}_r{self.pair.pair}e{self.pair.n}{f'.{self.pair.tries + 1}' if self.pair.tries else ''}s{self.pair.step}{role}"
        req = publish_request(op_id, ns or self.ns, item or self.item, rev or self.rev(item), fence_full, owner)
        return self._op("publish", req, label, clock_ms)

    def rev(self, item: str | None = None) -> str:
        if item is not None and item != self.item:
            return revision_of(self.w.world.seed_items[(self.ns, item)])
        return self.f.rev or revision_of(self.w.world.seed_items[(self.ns, self.item)])

    @staticmethod
    def _op(f: str, req: dict, label: str, clock_ms: int | None) -> dict:
        op = {"f": f, "value": req, "label": label}
        if clock_ms is not None:
            op["clock_ms"] = int(clock_ms)
        return op


# --------------------------------------------------------------------------- episode steps
# Each step: Ctx -> [(role, op), ...]; [] skips the step; None aborts the episode
# (a fact the step needs is missing because an earlier step did not go as planned).


def _own(x: Ctx, role: str = "a") -> dict | None:
    return x.f.claim(role)


def _takeover_vs_publish():
    def race(x):
        a = _own(x)
        return None if a is None else [("a", x.publish("a", "publish")), ("b", x.takeover("b", a, "takeover"))]

    def then(x):
        b = _own(x, "b")
        return [] if b is None else [("b", x.publish("b", "publish-new-owner", fence=_fence(b)))]
    return (race, then)


def _fence(claim: dict) -> dict:
    return {"owner_id": claim["owner_id"], "epoch": claim["epoch"]}


def _two_owners():
    def take(x):
        a = _own(x)
        return None if a is None else [("b", x.takeover("b", a, "takeover"))]

    def race(x):
        b = _own(x, "b")
        if b is None:
            return None
        return [("a", x.publish("a", "publish-old-owner")), ("b", x.publish("b", "publish-new-owner", fence=_fence(b)))]
    return (take, race)


def _publish_vs_release():
    def race(x):
        a = _own(x)
        return None if a is None else [("a", x.publish("a", "publish")), ("b", x.release(a, "release"))]
    return (race,)


def _probe(op: str, d: int):
    def probe(x):
        a = _own(x)
        if a is None:
            return None
        at = x.expires(a, d)
        label = "probe"
        # then, unpinned, the same role reads the item at once: real time is still before the
        # pinned instant, so the time the namespace reports must not go back below it (§4: every
        # decision, a rejection too, persists the floor): a one-call forward pin is a backward
        # clock step for the call after it, with no clock fault needed
        if op == "renew":
            return [("a", x.renew(a, label, clock_ms=at)), ("a", x.read(label="after-probe"))]
        if op == "release":
            return [("a", x.release(a, label, clock_ms=at)), ("a", x.read(label="after-probe"))]
        if op == "publish":
            return [("a", x.publish("a", label, clock_ms=at)), ("a", x.read(label="after-probe"))]
        return [("b", x.takeover("b", a, label, d)), ("b", x.read(label="after-probe"))]
    return (probe,)


def _fence_dimension(dim: str):
    def wrong(x):
        a = _own(x)
        if a is None:
            return None
        if dim == "namespace":  # another provisioned namespace: the fence must not fall through to it
            other = next((ns for ns in x.w.world.namespaces if ns != x.ns), None)
            if other is None:   # one namespace in all: nothing to fall through to (the episode is not run)
                return None
            return [("a", x.publish("a", "wrong-fence", fence={"ledger_namespace": other}))]
        if dim == "item":
            return [("a", x.publish("a", "wrong-fence", fence={"item_id": x.side}))]
        if dim == "owner":  # b's owner with a's epoch
            return [("b", x.publish("b", "wrong-fence", fence={"owner_id": x.owner("b")}))]
        epoch = int(a["epoch"])
        return [("a", x.publish("a", "wrong-fence", fence={"epoch": str(epoch - 1 if epoch > 1 else epoch + 1)}))]
    return (wrong,)


def _publish_after_release():
    def release(x):
        a = _own(x)
        # decided 1 ms into a's lease (like stale-revision's publish): the twin acquires after it need
        # a release that succeeded, and on a process-per-call program real time may be past the lease
        return None if a is None else [("a", x.release(a, "release", clock_ms=x.into_lease(a)))]

    def publish(x):
        # only after a release that succeeded (one that found its lease expired leaves an expired
        # claim: the publish would be fenced out as claim-expired, not no-active-claim); meanwhile b
        # tries the stale witness a's hold used on the now free item (claim-conflict, changing nothing)
        if not x.f.released:
            return None
        ops = [("a", x.publish("a", "publish-released"))]
        if _free_record(x) is not None and x.f.witness is not None:
            ops.append(("b", x.acquire("b", x.f.witness, "stale-witness-free")))
        return ops
    return (release, publish) + _twin_acquire()


def _first_then(second):
    """The episode's first publish, then ``second(x, first)`` (if it was definite)."""
    def first(x):
        return None if _own(x) is None else [("a", x.publish("a", "first"))]

    def then(x):
        if x.f.first is None or x.f.first_type not in ("ok", "fail"):
            return None
        return [("a", second(x, x.f.first))]
    return (first, then)


def _replay(x, first):
    return {"f": "publish", "value": dict(first), "label": "replay"}


def _replay_after_fail():
    def first(x):
        a = _own(x)
        if a is None:
            return None
        epoch = int(a["epoch"])
        return [("a", x.publish("a", "first", fence={"epoch": str(epoch - 1 if epoch > 1 else epoch + 1)}))]

    def then(x):
        if x.f.first is None or x.f.first_type != "fail":
            return None
        return [("a", _replay(x, x.f.first))]
    return (first, then)


def _reuse(kind: str):
    def second(x, first):
        req = dict(first)
        if kind == "bytes":
            data = candidate(x.item, x.owner("a"), first["operation_id"] + " again")
            req.update(candidate_source_base64=b64(data), candidate_sha256=revision_of(data))
        elif kind == "revision":
            other = x.rev() if x.rev() != first["expected_revision"] else x.f.old_rev
            req["expected_revision"] = other or revision_of(b"a revision this item never had")
        else:  # another item: the side item, its own fence, a valid candidate for it
            data = candidate(x.side, x.owner("a"), first["operation_id"])
            req.update(item_id=x.side, expected_revision=x.rev(x.side), candidate_source_base64=b64(data),
                       candidate_sha256=revision_of(data), claim_fence=dict(first["claim_fence"], item_id=x.side))
        return {"f": "publish", "value": req, "label": f"reuse-{kind}"}
    return _first_then(second)


def _stale_witness():
    def stale(x):
        if _own(x) is None or x.f.witness is None:
            return None
        return [("b", x.acquire("b", x.f.witness, "stale-witness"))]

    def expired(x):
        # the same stale witness once a's claim has expired: a backend that compares the witness only
        # while a claim is live (witness-ignored on an expired item) lets this one through
        a = _own(x)
        if a is None or x.f.witness is None:
            return []
        return [("b", x.acquire("b", x.f.witness, "stale-witness-expired", clock_ms=x.expires(a)))]
    return (stale, expired)


# --------------------------------------------------------------------------- check-then-act races
# A decision checked under the lock and written after it (chaos.testing.cta_mutants) shows only
# when a rival's call runs inside that gap: the twin steps send two calls at once (timed); the frozen
# steps stop the first call right after it ends a write transaction (the gap itself,
# chaos.faults.lockfreeze), send the rival once the freeze landed, and let the first go on once the
# rival has its reply. A correct backend's call has then committed everything: the rival is refused.
# They are steps of the episodes of their decision (publish-after-release, race:twin-publish,
# stale-expiry, legacy-writes), not kinds of their own: every kind costs a process-per-call program
# a prologue in its first pass through the rotation (docs/mutants.md, issue 33).


def _tag(x: Ctx) -> str:
    """A run-unique rendezvous tag for a frozen call that has no operation id."""
    return f"freeze_{x.owner('a')}_r{x.pair.pair}e{x.pair.n}.{x.pair.tries}s{x.pair.step}"


def _frozen(x: Ctx, op: dict, tag: str) -> dict:
    """Held exactly until the rival has its reply: the gap needs nothing longer (a minimum hold
    only slows the rotation of a process-per-call program, whose calls take most of a second)."""
    return dict(op, fault=dict(_fault(x, "freeze"), hold_ms=0, after="write-release", tag=tag))


def _rival(op: dict, tag: str) -> dict:
    return dict(op, after_freeze=tag, ends_freeze=tag)


def _free_record(x: Ctx) -> dict | None:
    rec = x.f.record
    return rec if x.f.released and rec is not None and rec.get("active") is None else None


def _twin_acquire():
    """Several owners on one free item with one witness: at once, then frozen (the check-then-act
    acquire's gap), after a release (publish-after-release's last steps)."""
    def twins(x):
        rec = _free_record(x)
        if rec is None:
            return None
        return [("a", x.acquire("a", rec, "acquire-twin")), ("b", x.acquire("b", rec, "acquire-twin"))]

    def frozen(x):   # both take the winner's claim over at its expiry, with one witness
        won = [c for c in (_own(x, role) for role in ROLES) if c is not None]
        if len(won) != 1:
            return None
        tag = _tag(x)
        return [("a", _frozen(x, x.takeover("a", won[0], "frozen-acquire"), tag)),
                ("b", _rival(x.takeover("b", won[0], "acquire-same-witness"), tag))]
    return (twins, frozen)


def _twin_publish():
    def twins(x):
        a = _own(x)
        if a is None:
            return None
        at = x.into_lease(a)   # both inside a's lease, both under a's fence, both on the known revision
        return [("a", x.publish("a", "publish-twin", clock_ms=at)), ("b", x.publish("b", "publish-twin", clock_ms=at))]

    def frozen(x):
        a = _own(x)
        if a is None:
            return None
        at = x.into_lease(a)
        pub = x.publish("a", "frozen-publish", clock_ms=at)
        tag = pub["value"]["operation_id"]
        # b publishes under the same fence on the revision the pair knew before a's publish, and a goes
        # on only once b's publish has its reply: a's late write then comes after b's own commit
        return [("a", _frozen(x, pub, tag)), ("b", _rival(x.publish("b", "publish-rival", clock_ms=at), tag))]
    return (twins, frozen)


def _frozen_legacy(x: Ctx):
    """b's legacy transition of the side item frozen while a acquires it. On the side item: a
    permitted legacy write makes the checkers leave its tuple's ledger bytes unjudged, and the race
    item's revision chain must stay judged."""
    rb = x.f.other
    if not rb or rb.get("item_id") != x.side:
        return None
    tup = {"ledger_namespace": x.ns, "item_id": x.side}
    pin = x.expires(rb["active"]) if rb.get("active") else None   # a leftover claim: decided at its expiry
    legacy = {"f": "legacy-transition", "value": dict(tup), "label": "frozen-legacy-transition"}
    if pin is not None:
        legacy["clock_ms"] = pin
    tag = _tag(x)
    wit = {"last_epoch": rb.get("last_epoch"), "active": rb.get("active")}
    return [("b", _frozen(x, legacy, tag)),
            ("a", _rival(x.acquire("a", wit, "acquire-side", tup=tup, clock_ms=pin), tag))]


def _stale_expiry():
    def renew(x):
        a = _own(x)
        if a is None:
            return None
        # decided 1 ms after the issue, so the new expiry differs from the old one; frozen at the end of
        # its write transaction while b releases with the same CAS tuple (a check-then-act renew lets both
        # through), then a goes on
        tag, at = _tag(x), x.into_lease(a)
        return [("a", _frozen(x, x.renew(a, "renew", clock_ms=at), tag)),
                ("b", _rival(x.release(a, "release-same-tuple", clock_ms=at), tag))]

    def stale(x):
        a = _own(x)
        old = x.f.hold
        if a is None or old is None or a["expires_at"] == old["expires_at"]:
            return None
        # pinned like the frozen steps around it: an unpinned call would persist real time as the floor,
        # and on a process-per-call program real time is past the lease by then, so the frozen release
        # after it met claim-expired, not its rival (split-release-reread, CLI seed 1: valid)
        return [("a", x.renew(a, "stale-expiry", expires_at=old["expires_at"], clock_ms=x.into_lease(a)))]

    def release(x):
        a = _own(x)
        if a is None:
            return []
        # 1 ms after the renew: the rival renew's new expiry differs from the tuple's, so in either order
        # one of the two must be refused (a check-then-act release lets both through)
        tag, at = _tag(x), x.into_lease(a) + 1
        return [("a", _frozen(x, x.release(a, "frozen-release", clock_ms=at), tag)),
                ("b", _rival(x.renew(a, "renew-same-tuple", clock_ms=at), tag))]
    return (renew, stale, release)


def _stale_revision():
    def stale(x):
        a = _own(x)
        if a is None:
            return None
        old = x.f.old_rev or revision_of(b"a revision this item never had")
        # decided 1 ms into a's lease, like stale-expiry's renew: the revision is checked only after an
        # unexpired claim (§6 step 7 before 8), and a's lease may start at a pinned instant already past
        # in real time (the hold takes over at the previous expires_at) or run out within one slow call
        return [("a", x.publish("a", "stale-revision", rev=old, clock_ms=x.into_lease(a)))]
    return (stale,)


def _unbound():
    def claim_ops(x):
        tup = {"ledger_namespace": x.w.world.unbound, "item_id": x.item}
        return [("a", x.read(tup, "unbound")),
                ("b", x.acquire("b", {"last_epoch": "0", "active": None}, "unbound", tup=tup)),
                # and the ledger's capability profile again: it must not change during a run (§3)
                ("b", {"f": "capabilities", "value": {}, "label": "capabilities"})]

    def publish(x):
        return [("a", x.publish("a", "unbound", ns=x.w.world.unbound, fence={"ledger_namespace": x.w.world.unbound}))]
    return (claim_ops, publish)


#: values the contract's grammar refuses (§2): each must get exit 2 invalid-request before any decision
#: (§5, §6 step 2). Wowbagger 0.1.0-alpha.7 decides the first two (docs/wowbagger-findings.md N1).
NONCANONICAL_OWNER = "agent p!"          # a space and '!' are outside [A-Za-z0-9][A-Za-z0-9._:/-]{0,127}
EPOCH_PAST_MAX = "18446744073709551616"  # 2^64: one past the largest epoch
LONG_OWNER = "a" * 129                   # one past the owner grammar's 128 characters


def _noncanonical():
    """a's publishes with a fence whose owner or epoch breaks the grammar, then b's
    acquire and a's renew with a noncanonical owner or epoch (what a careless
    client sends: a display name as the owner, an epoch from a 128-bit counter)."""
    def fence(label: str, **wrong):   # one step each: a step's publishes would share an operation id
        def step(x):
            return None if _own(x) is None else [("a", x.publish("a", label, fence=wrong))]
        return step

    def claims(x):
        a = _own(x)
        if a is None:
            return None
        acquire = x.acquire("b", {"last_epoch": a["epoch"], "active": a}, "acquire-owner-grammar")
        renew = x.renew(a, "renew-epoch-past-max")
        return [("b", dict(acquire, value=dict(acquire["value"], owner_id=NONCANONICAL_OWNER))),
                ("a", dict(renew, value=dict(renew["value"], epoch=EPOCH_PAST_MAX)))]
    return (fence("fence-owner-grammar", owner_id=NONCANONICAL_OWNER), fence("fence-epoch-past-max", epoch=EPOCH_PAST_MAX),
            fence("fence-owner-too-long", owner_id=LONG_OWNER), claims)


#: how far ahead of a's expiry each refusal of ``refusals-keep-floor`` is pinned (k days for the k-th):
#: beyond any clock fault the suite injects, so only a persisted floor can make a later reply show it
REFUSAL_AHEAD_MS = 86_400_000


def _refusals_keep_floor():
    """a's publishes refused before the floor step (an invalid candidate, a wrong
    digest, a noncanonical fence), each decided at an instant days ahead and each
    followed at once by an unpinned read: the read must show real time, not the
    pinned instant (§6 steps 1-5 stop before step 6; vectors.md §5.1 rule 8)."""
    def refused(k: int, label: str):
        def step(x):
            a = _own(x)
            if a is None:
                return None
            op = x.publish("a", label, clock_ms=x.expires(a) + k * REFUSAL_AHEAD_MS)
            if label == "invalid-candidate-ahead":   # another item's bytes: ledger-invalid (§6 step 5)
                data = candidate(x.side, x.owner("a"), "refused ahead")
                op["value"] = dict(op["value"], candidate_source_base64=b64(data), candidate_sha256=revision_of(data))
            elif label == "bad-digest-ahead":         # candidate-digest-mismatch (§6 step 2)
                op["value"] = dict(op["value"], candidate_sha256=revision_of(b"not the candidate's bytes"))
            else:                                     # invalid-request (§6 step 2)
                op["value"] = dict(op["value"], claim_fence=dict(op["value"]["claim_fence"], owner_id=NONCANONICAL_OWNER))
            return [("a", op), ("a", x.read(label="after-refusal"))]
        return step
    return tuple(refused(k, label) for k, label in
                 enumerate(("invalid-candidate-ahead", "bad-digest-ahead", "noncanonical-ahead"), 1))


def _fault(x: Ctx, kind: str) -> dict:
    """The seeded point (and hold) of an in-call fault for this episode."""
    s = Stream(x.ctx.seed, ("in-call", x.pair.pair, x.pair.n) + x.pair.rerun_key)
    at, s = s.random()
    hold, _ = s.randint(*FREEZE_HOLD_MS)
    return {"kind": kind, "at": round(at, 6), **({"hold_ms": hold} if kind == "freeze" else {})}


#: how long a frozen call is held at least (and until b's takeover has its reply)
FREEZE_HOLD_MS = (400, 1200)


def _frozen_publish():
    def race(x):
        a = _own(x)
        if a is None:
            return None
        # decided 1 ms into a's lease (like stale-revision's publish: the lease may have started at a
        # pinned instant already past in real time), frozen at the end of a write transaction where the
        # backend's processes take record locks (the gap of a check-then-act fence), else at the seeded
        # time point; b's takeover is sent once the freeze landed, and a goes on once b has its reply
        pub = x.publish("a", "frozen-publish", clock_ms=x.into_lease(a))
        tag = pub["value"]["operation_id"]
        fault = dict(_fault(x, "freeze"), after="write-release", tag=tag)
        return [("a", dict(pub, fault=fault)), ("b", dict(x.takeover("b", a, "takeover"), after_freeze=tag, ends_freeze=tag))]

    def then(x):
        # b publishes only after a's call ended: a rival publication inside the freeze would change the
        # revision, and a check-then-act fence's write would then be refused by the revision check
        # (§6 step 8) instead of showing that it passed a stale fence
        b = _own(x, "b")
        return [] if b is None else [("b", x.publish("b", "publish-new-owner", fence=_fence(b)))]
    return (race, then)


def _killed(op: str):
    def kill(x):
        a = _own(x)
        if a is None:
            return None
        call = x.publish("a", "killed-call") if op == "publish" else x.renew(a, "killed-call")
        return [("a", dict(call, fault=_fault(x, "kill")))]
    return (kill,)


def _legacy_writes():
    def refused(x):
        a = _own(x)
        if a is None:
            return None
        # decided 1 ms into a's lease, like stale-revision's publish: a's lease may start at a pinned
        # instant already past in real time, and an expired claim lets a legacy transition through
        # (correctly, §7), so a process-per-call program never took the refused path (epoch-wraps, seed 1)
        at = x.into_lease(a)
        return [("b", {"f": "legacy-transition", "value": dict(x.tup), "label": "legacy-transition", "clock_ms": at}),
                ("b", {"f": "legacy-create", "value": dict(x.tup), "label": "legacy-create", "clock_ms": at}),
                ("a", x.read({"ledger_namespace": x.ns, "item_id": x.side}, "read-side"))]   # for the next step
    return (refused, _frozen_legacy)


def _bad_digest():
    def bad(x):
        if _own(x) is None:
            return None
        op = x.publish("a", "bad-digest")
        op["value"] = dict(op["value"], candidate_sha256=revision_of(b"not the candidate's bytes"))
        return [("a", op)]
    return (bad,)


def _incomplete_retry():
    def second(x, first):
        req = {k: first[k] for k in ("operation_id", "ledger_namespace", "item_id")}
        return {"f": "publish", "value": req, "label": "incomplete-retry"}
    return _first_then(second)


def _invalid_candidate():
    def invalid(x):
        if _own(x) is None:
            return None
        data = candidate(x.side, x.owner("a"), "another item's bytes")   # a valid item, but not this one
        op = x.publish("a", "invalid-candidate")
        op["value"] = dict(op["value"], candidate_source_base64=b64(data), candidate_sha256=revision_of(data))
        return [("a", op)]
    return (invalid,)


def _epoch_exhaustion():
    def read(x):
        return [("a", x.read({"ledger_namespace": x.ns, "item_id": x.exhausted}, "read-exhausted"))]

    def take(x):
        rb = x.f.other
        if not rb or rb.get("item_id") != x.exhausted:
            return None
        tup = {"ledger_namespace": x.ns, "item_id": x.exhausted}
        wit = {"last_epoch": rb.get("last_epoch"), "active": rb.get("active")}
        pin = x.expires(rb["active"]) if rb.get("active") else None
        return [("a", x.acquire("a", wit, "take-last-epoch", tup=tup, clock_ms=pin))]

    def over(x):
        claim = x.f.other_claim   # a got the last epoch: b's takeover at its expiry has none left
        if claim is None:
            return []
        tup = {"ledger_namespace": x.ns, "item_id": x.exhausted}
        return [("b", x.acquire("b", {"last_epoch": claim["epoch"], "active": claim}, "acquire-exhausted",
                                tup=tup, clock_ms=x.expires(claim)))]
    return (read, take, over)


STEPS: dict = {
    "race:takeover-vs-publish": _takeover_vs_publish(),
    "race:two-owners": _two_owners(),
    "race:publish-vs-release": _publish_vs_release(),
    **{probe_name(op, d): _probe(op, d) for op in PROBE_OPS for d in PROBE_OFFSETS},
    "fence-namespace": _fence_dimension("namespace"),
    "fence-item": _fence_dimension("item"),
    "fence-owner": _fence_dimension("owner"),
    "fence-epoch": _fence_dimension("epoch"),
    "publish-after-release": _publish_after_release(),
    "replay-after-ok": _first_then(_replay),
    "replay-after-fail": _replay_after_fail(),
    "reuse-bytes": _reuse("bytes"),
    "reuse-revision": _reuse("revision"),
    "reuse-item": _reuse("item"),
    "stale-witness": _stale_witness(),
    "stale-expiry": _stale_expiry(),
    "stale-revision": _stale_revision(),
    "unbound-namespace": _unbound(),
    "frozen-publish": _frozen_publish(),
    "killed-publish": _killed("publish"),
    "killed-renew": _killed("renew"),
    "legacy-writes": _legacy_writes(),
    "bad-digest": _bad_digest(),
    "incomplete-retry": _incomplete_retry(),
    "invalid-candidate": _invalid_candidate(),
    "epoch-exhaustion": _epoch_exhaustion(),
    "noncanonical-requests": _noncanonical(),
    "refusals-keep-floor": _refusals_keep_floor(),
    "race:twin-publish": _twin_publish(),
}
assert set(STEPS) == set(EPISODES)
