"""The ``claims`` workload: honest agents following the contract's loop.

Each client thread runs one agent (contract §4-§6):

    read -> acquire (witness = the read's {last_epoch, active})
         -> work (logical sleep of ``work_ms``) -> renew
         -> publish-claimed a valid successor item -> release -> next cycle

* ``expected_revision`` is what the agent knows: the seeded bytes, a
  ``committed_revision`` from any ok publish, or the ``actual_revision`` of a
  ``ledger-revision-conflict`` (one retry with a fresh operation id).
* ``operation_id`` is ``pub_<owner>_<n>``, unique in the run.
* After an ``info`` the thread's process is retired (the interpreter gives it
  a new id) and the agent's next owner is derived from the new process, so a
  retired worker never acts again. A claim op that ended ``info`` is followed
  by a new cycle, which starts with a read. A publish that ended ``info`` is
  followed by ``publication-read`` of its operation id and, on
  ``operation-not-found``, a retry of the SAME complete request (§6).
* ``lease_ms`` against ``work_ms`` decides how often leases expire before the
  renew, so expiry, ``claim-expired`` and takeover really happen.
* ``skip_held`` (a slow run's, ``chaos.timing``): a read that shows a claim
  live at its own ``observed_at`` ends the cycle there, without the acquire
  it would refuse as ``claim-held``.
* ``owner_id`` is ``<owner_prefix>-p<process>``: it stays the same across a
  worker's cycles while its process lives, so a worker often re-acquires an
  item it held before under the same owner (a new owner only after ``info``,
  design.md).

Two seeded misbehaviours of *legal but careless* clients, on by default at a
modest rate so the default ``chaos run`` exercises them (0 turns them off):

* ``blind_retry_rate``: after a publish completes (ok or fail), the agent
  re-sends the IDENTICAL complete request with the same ``operation_id``
  without reading first - a client that lost its reply and retries blindly.
  Contract §6: an identical request returns the stored envelope, no second
  write. Then the agent goes on as the first reply said.
* ``stale_fence_rate``: a worker that re-acquired an item it held before
  under the same owner publishes with its PREVIOUS (stale) epoch as the
  fence - a buggy client carrying an old fence. A fenced backend rejects it
  (``claim-fence-rejected`` epoch-mismatch, a stored outcome; or a revision
  conflict); the agent then publishes with its current fence.

Careless clients after a lost reply (a publish that ended ``info``; on by
default, drawn per cycle):

* ``replay_after_info_rate``: the new process re-sends the IDENTICAL request
  at once, without reading the outcome first (a stored outcome must come
  back verbatim; a request that never committed is decided afresh);
* ``stale_after_loss_rate``: the agent's next cycle works on the same item
  and its first publish carries the lost request's ``expected_revision``
  (stale if the lost one committed: ``ledger-revision-conflict``).

A hold publishes ``publishes`` (drawn per cycle) successive revisions before
its release: publication does not renew or release a claim (§6).

Racer pairs (``race_pairs``, ``workloads.races``): up to ``race_pairs``
pairs of the first client threads, as many as leave at least two agents,
race in namespaces of their own through a seeded rotation of adversarial episodes
(races, exact lease-boundary probes, wrong fences, replays, reused operation
ids, stale witnesses / expiries / revisions, an unbound namespace); the
other threads are the agents above.

The universe: ``namespaces`` agent namespaces of ``items`` tuples each, with
the SAME item ids in every agent namespace (``shared_item_ids``: equal ids in
different namespaces are unrelated, §2), one namespace per racer pair (a race
item and a side item), and one well-formed namespace that is never
provisioned (``Universe.unbound``).

Every op carries ``intent`` (what the client meant: ``agent:<step>``,
``blind-retry``, ``stale-fence``, ``replay-after-info``, ``stale-after-loss``,
or a racer's ``<episode>:<step>``), read by ``workloads.coverage``.

Per-cycle draws (which item, how long to work, how long to back off) come
from ``Stream(seed, ("claims", thread, cycle))``: the plan of a thread is a
pure function of the seed, however many cycles the run completes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from backends.contract.values import EPOCH_MAX, parse_instant
from workloads.generator import MS, NEMESIS, PENDING, Context, Gen, soonest
from workloads.items import (b64, item_fields, mint_item_id, mint_namespace, publish_request, render, revision_of,
                             stored_revision)
from workloads.races import EPISODES, RacePair
from workloads.random import Stream


#: for how many lease durations an agent keeps coming back to the item of a
#: lost publish with its revision (the lost owner's lease has to expire first)
STICKY_LEASES = 3


@dataclass(frozen=True)
class ClaimsConfig:
    namespaces: int = 2
    items: int = 3            # items per namespace
    lease_ms: int = 1500
    work_ms: tuple = (100, 2000)
    backoff_ms: tuple = (20, 200)
    owner_prefix: str = "agent"
    publish: bool = True
    blind_retry_rate: float = 0.1    # per cycle: re-send the identical publish blindly
    stale_fence_rate: float = 0.3    # per cycle that re-holds an item: publish first with the old epoch
    publishes: tuple = (1, 3)        # successive publications per hold
    replay_after_info_rate: float = 0.5   # after a lost publish: replay it identically, without reading
    stale_after_loss_rate: float = 0.5    # after a lost publish: publish on the same item with its old revision
    shared_item_ids: bool = True     # the same item ids in every agent namespace
    race_pairs: int = 2              # racer pairs (workloads.races), when the run has enough threads
    race_lease_ms: int = 1000
    episodes: tuple = EPISODES       # the racers' rotation
    commit: bool = False      # Git-backed ledger: commit each acknowledged publication (see _commit_step)
    skip_held: bool = False   # a read showing a live claim ends the cycle without the acquire (slow runs, chaos.timing)


@dataclass(frozen=True)
class Universe:
    """The tuples of a run and their seeded item bytes."""

    namespaces: tuple      # every provisioned namespace: the agents', then one per racer pair
    tuples: tuple          # every provisioned tuple ((ns, item_id), ...): the agents', then the racers'
    seed_items: dict       # (ns, item_id) -> bytes, for every provisioned tuple
    agent_tuples: tuple = ()
    race_tuples: tuple = ()  # per pair: ((ns, race item), (ns, side item), (ns, exhausted item))
    unbound: str = ""        # a well-formed namespace that is never provisioned
    seed_claims: tuple = ()  # claim records seeded as they are (the exhausted items' high-water marks)

    def durable(self) -> dict:
        """The manifest-shaped durable state that seeds the store."""
        return {
            "clock_floors": [],
            "claims": [dict(c) for c in self.seed_claims],
            "ledgers": [
                {"ledger_namespace": ns, "item_id": item, "revision": revision_of(data), "source_base64": b64(data)}
                for (ns, item), data in self.seed_items.items()
            ],
            "publication_outcomes": [],
        }


def universe(seed: int, cfg: ClaimsConfig, namespaces_given: list[str] | None = None) -> Universe:
    """The seeded tuples; ``namespaces_given`` replaces the minted namespaces
    (a program that mints its own at provision), the items stay the same."""
    s = Stream(seed, ("universe",))
    namespaces, tuples, items, ids = [], [], {}, []
    for n in range(cfg.namespaces):
        ns, s = mint_namespace(s)
        if namespaces_given is not None:
            ns = namespaces_given[n]
        namespaces.append(ns)
        for i in range(cfg.items):
            if cfg.shared_item_ids and n > 0:
                item = ids[i]
            else:
                item, s = mint_item_id(s)
                ids.append(item)
            tuples.append((ns, item))
            items[(ns, item)] = render(item_fields(item, f"Synthetic work item {len(tuples)}"),
                                       "Synthetic work item seeded for a chaos run.")
    agent_tuples = tuple(tuples)
    race, claims, r = [], [], Stream(seed, ("universe", "race"))
    # at least the default number of pairs is provisioned: a slow run's calibration lowers
    # race_pairs after set-up (chaos.timing), and its rebuilt universe keeps the tuples set up
    for k in range(max(cfg.race_pairs, ClaimsConfig.race_pairs) if cfg.race_pairs else 0):
        ns, r = mint_namespace(r)
        if namespaces_given is not None and len(namespaces_given) > cfg.namespaces + k:
            ns = namespaces_given[cfg.namespaces + k]
        namespaces.append(ns)
        pair = []
        for role in ("race", "side", "exhausted"):
            item, r = mint_item_id(r)
            pair.append((ns, item))
            tuples.append((ns, item))
            items[(ns, item)] = render(item_fields(item, f"Race pair {k} {role} item"),
                                       "Synthetic work item seeded for a racer pair.")
        race.append(tuple(pair))
        # one acquire short of the epoch high-water mark: the next takeover is epoch-exhausted (§4);
        # seeded only for a run that has the episode (a black-box backend cannot seed a claim)
        if "epoch-exhaustion" in cfg.episodes:
            claims.append({"ledger_namespace": ns, "item_id": pair[2][1], "last_epoch": str(EPOCH_MAX - 1),
                           "active": None})
    unbound, _ = mint_namespace(Stream(seed, ("universe", "unbound")))
    return Universe(tuple(namespaces), tuple(tuples), items, agent_tuples, tuple(race), unbound, tuple(claims))


@dataclass(frozen=True)
class Agent:
    """One thread's agent state (immutable; every transition returns a new one)."""

    step: str = "read"
    at: int = 0
    cycle: int = 0
    owner: str = ""
    inflight: bool = False
    read_back: dict | None = None
    epoch: str | None = None
    expires_at: str | None = None
    pub_n: int = 0
    pub_tries: int = 0
    pending: dict | None = None   # the publish request being recovered
    recover_tries: int = 0
    held: tuple = ()              # ((key, epoch), ...): the last epoch THIS owner held per item
    stale_epoch: str | None = None  # an older epoch of the current item under this owner (stale fence)
    stale: bool = False           # the publish in flight carries the stale fence
    blind_done: bool = False      # this cycle's blind retry was sent
    after: "Agent | None" = None  # blind-retry / commit: where the agent goes on afterwards
    commit_req: dict | None = None  # the Git commit of an acknowledged publication
    pubs_done: int = 0            # acknowledged publications of this hold
    stick: int | None = None      # the cycle works on this tuple index, not the planned one
    stale_rev: str | None = None  # stale-after-loss: the first publish of the cycle carries this revision
    next_stick: int | None = None     # set by a lost publish: the next cycle's ``stick`` ...
    next_stale_rev: str | None = None  # ... and ``stale_rev``
    stick_until: int = 0          # an unused ``stale_rev`` is kept until then (the lost owner's lease expires first)
    replayed: bool = False        # this cycle's lost publish was replayed


def _live_claim(read_back: dict | None) -> bool:
    """The read shows an active claim not expired at its own ``observed_at``."""
    active = (read_back or {}).get("active")
    try:
        return bool(active) and parse_instant(active["expires_at"]) > parse_instant(read_back["observed_at"])
    except (KeyError, TypeError, ValueError):
        return False


def plan_cycle(seed: int, thread, cycle: int, n_tuples: int, cfg: ClaimsConfig) -> dict:
    """The seeded choices of one cycle: item index, work and backoff (ms),
    whether it retries its publish blindly and whether it tries a stale fence."""
    item, work, backoff, blind, stale, publishes, replay, sticky = _cycle_draws(
        seed, thread, cycle, n_tuples, tuple(cfg.work_ms), tuple(cfg.backoff_ms), tuple(cfg.publishes))
    return {"item": item, "work_ms": work, "backoff_ms": backoff,
            "blind_retry": blind < cfg.blind_retry_rate, "stale_fence": stale < cfg.stale_fence_rate,
            "publishes": publishes, "replay_after_info": replay < cfg.replay_after_info_rate,
            "stale_after_loss": sticky < cfg.stale_after_loss_rate}


@lru_cache(maxsize=4096)
def _cycle_draws(seed: int, thread, cycle: int, n_tuples: int, work_ms: tuple, backoff_ms: tuple,
                 publishes: tuple) -> tuple:
    """``plan_cycle``'s draws from the seed, kept: the generator asks for a cycle's plan at every op
    it considers for that thread, some twenty-five times per op it hands out."""
    s = Stream(seed, ("claims", thread, cycle))
    item, s = s.randint(0, n_tuples - 1)
    work, s = s.randint(*work_ms)
    backoff, s = s.randint(*backoff_ms)
    blind, s = s.random()
    stale, s = s.random()
    n_publishes, s = s.randint(*publishes)
    replay, s = s.random()
    sticky, s = s.random()
    return item, work, backoff, blind, stale, n_publishes, replay, sticky


@dataclass(frozen=True)
class ClaimsWorkload(Gen):
    cfg: ClaimsConfig
    world: Universe
    agents: tuple = ()        # ((thread, Agent), ...)
    revisions: tuple = ()     # (((ns, item), revision), ...)
    pairs: tuple = ()         # RacePair per racing pair (built on first use)
    first_pass_only: bool = False   # past the time limit: only racers, until every kind is exercised (finish_rotation)

    # ------------------------------------------------------------------ helpers

    def _clients(self, ctx: Context) -> list:
        return sorted(t for t in ctx.threads if t != NEMESIS)

    def _racers(self, ctx: Context) -> tuple:
        """``((thread a, thread b), ...)``: the first client threads, in pairs,
        when at least two agents remain."""
        clients = self._clients(ctx)
        k = max(0, min(self.cfg.race_pairs, len(self.world.race_tuples), (len(clients) - 2) // 2))
        return tuple((clients[2 * i], clients[2 * i + 1]) for i in range(k))

    def _pairs(self, ctx: Context) -> tuple:
        racers = self._racers(ctx)
        return self.pairs or tuple(RacePair(i, threads, len(racers)) for i, threads in enumerate(racers))

    def _agents(self, ctx: Context) -> dict:
        table = dict(self.agents)
        racing = {t for threads in self._racers(ctx) for t in threads}
        for t in self._clients(ctx):
            if t not in racing:
                table.setdefault(t, Agent())
        return table

    def _plan(self, ctx: Context, thread, agent: Agent) -> dict:
        return plan_cycle(ctx.seed, thread, agent.cycle, len(self.world.agent_tuples), self.cfg)

    def _key(self, ctx: Context, thread, agent: Agent) -> tuple:
        i = agent.stick if agent.stick is not None else self._plan(ctx, thread, agent)["item"]
        return self.world.agent_tuples[i]

    def _revision(self, key) -> str:
        return dict(self.revisions).get(key) or revision_of(self.world.seed_items[key])

    def _learn(self, key, rev: str | None) -> tuple:
        if not rev:
            return self.revisions
        table = dict(self.revisions)
        table[key] = rev
        return tuple(table.items())

    def _request(self, ctx: Context, thread, a: Agent, owner: str) -> tuple[str, dict, Agent]:
        plan = self._plan(ctx, thread, a)
        ns, item = key = self._key(ctx, thread, a)
        tup = {"ledger_namespace": ns, "item_id": item}
        if a.step == "read":
            return "read", tup, a
        if a.step == "acquire":
            rb = a.read_back or {}
            expected = {"last_epoch": rb.get("last_epoch", "0"), "active": rb.get("active")}
            return "acquire", dict(tup, owner_id=owner, lease_duration_ms=self.cfg.lease_ms, expected=expected), a
        if a.step in ("renew", "release"):
            req = dict(tup, owner_id=owner, epoch=a.epoch, expected_expires_at=a.expires_at)
            if a.step == "renew":
                req["lease_duration_ms"] = self.cfg.lease_ms
            return a.step, req, a
        if a.step == "publish":
            op_id = f"pub_{owner}_{a.pub_n}"
            stale = bool(plan["stale_fence"] and a.stale_epoch and a.stale_epoch != a.epoch)
            fence = dict(tup, owner_id=owner, epoch=a.stale_epoch if stale else a.epoch)
            req = publish_request(op_id, ns, item, a.stale_rev or self._revision(key), fence, owner)
            return "publish", req, replace(a, pub_n=a.pub_n + 1, pending=req, stale=stale, stale_epoch=None,
                                           stale_rev=None)
        if a.step == "pub-read":
            p = a.pending
            return "publication-read", {"operation_id": p["operation_id"], "ledger_namespace": p["ledger_namespace"],
                                        "item_id": p["item_id"]}, a
        if a.step in ("pub-retry", "blind-retry", "replay-info"):
            return "publish", a.pending, a
        if a.step == "commit":
            return "commit", a.commit_req, a
        if a.step == "verify":
            return "verify", {"ledger_namespace": a.commit_req["ledger_namespace"]}, a
        raise AssertionError(a.step)

    @staticmethod
    def _intent(a: Agent, a2: Agent) -> str:
        """What the client meant by the op it sends in state ``a`` (``a2``: after it)."""
        if a.step == "blind-retry":
            return "blind-retry"
        if a.step == "replay-info":
            return "replay-after-info"
        if a.step == "publish" and a2.stale:
            return "stale-fence"
        if a.step == "publish" and a.stale_rev:
            return "stale-after-loss"
        return f"agent:{a.step}"

    # ------------------------------------------------------------------ extension

    def rotation_left(self, ctx: Context) -> tuple:
        """The episode kinds of the racers' rotation no episode has exercised
        yet: not ended, or ended only by faults taking its prologue
        (incomplete-retry-replayed, CLI seed 1: the one episode's
        hold-takeover met an fsync error, its rerun a lost reply)."""
        done = {k for pair in self._pairs(ctx) for k in pair.settled(ctx, self).exercised}
        return tuple(k for k in self.cfg.episodes if k not in done)

    def finish_rotation(self) -> "ClaimsWorkload":
        """This workload with only what the rotation still lacks: agents start
        nothing new (their calls took the CPU a racer's call waits for); a
        pair goes on with its first pass, then runs, out of the rotation's
        order, a kind no episode has exercised yet and no other pair is on
        (``chaos.runner.UntilProven``)."""
        return replace(self, first_pass_only=True)

    def _finishing(self, ctx: Context, j: int, pair):
        """``pair`` (the ``j``-th) as it goes on past the time limit, or None: nothing left for it."""
        if not pair.idle:
            return pair
        nxt = pair.settled(ctx, self)
        if nxt.n == pair.n and (pair.step or pair.tries):   # between two steps of an episode, or before its rerun
            return pair
        left = self.rotation_left(ctx)
        if nxt.in_first_pass(self.cfg) and nxt.kind(ctx.seed, self.cfg) in left:
            return pair
        busy = {p.kind(ctx.seed, self.cfg) for i, p in enumerate(self._pairs(ctx)) if i != j and not p.idle}
        todo = [k for k in left if k not in busy]
        return pair.again(ctx, self, todo[0]) if todo else None

    # ------------------------------------------------------------------ generator

    def op(self, ctx: Context):
        table = self._agents(ctx)
        cands = []
        for i, t in enumerate(ctx.threads):
            a = table.get(t)
            if a is None or a.inflight or t not in ctx.free or self.first_pass_only:
                continue
            owner = f"{self.cfg.owner_prefix}-p{ctx.process_of[t]}"
            if a.owner != owner:  # a new process: what the old owner held is not ours
                a = replace(a, held=(), stale_epoch=None)
            f, req, a2 = self._request(ctx, t, a, owner)
            op = {"process": ctx.process_of[t], "type": "invoke", "f": f, "value": req, "time": max(ctx.time, a.at),
                  "intent": self._intent(a, a2)}
            cands.append((i, (op, (t, (a2, owner), None))))   # its next state is made for the one chosen
        pairs = self._pairs(ctx)
        for j, pair in enumerate(pairs):
            if self.first_pass_only and (pair := self._finishing(ctx, j, pair)) is None:
                continue
            res = pair.op(ctx, self)
            if res is not PENDING:
                cands.append((len(ctx.threads) + j, (res[0], ("pair", j, res[1]))))
        if not cands:
            return PENDING
        i, (op, (t, a, new_pair)) = soonest(cands)
        if t == "pair":
            return op, replace(self, pairs=pairs[:a] + (new_pair,) + pairs[a + 1:])
        a2, owner = a
        table[t] = replace(a2, inflight=True, owner=owner)
        return op, replace(self, agents=tuple(table.items()), pairs=pairs)

    def update(self, ctx: Context, event: dict):
        if event.get("type") == "invoke":
            return self
        t = ctx.thread_of(event.get("process"))
        pairs = self._pairs(ctx)
        for j, pair in enumerate(pairs):
            if t in pair.threads:
                return replace(self, pairs=pairs[:j] + (pair.update(ctx, self, event),) + pairs[j + 1:])
        table = self._agents(ctx)
        if t not in table or not table[t].inflight:
            return self
        a = replace(table[t], inflight=False)
        a, revisions = self._step(ctx, t, a, event)
        table[t] = a
        return replace(self, agents=tuple(table.items()), revisions=revisions, pairs=pairs)

    def _end_cycle(self, ctx: Context, t, a: Agent, backoff: bool) -> Agent:
        wait = self._plan(ctx, t, a)["backoff_ms"] * MS if backoff else 0
        if a.next_stale_rev is not None:
            stick, stale_rev, until = a.next_stick, a.next_stale_rev, ctx.time + STICKY_LEASES * self.cfg.lease_ms * MS
        elif a.stale_rev is not None and ctx.time < a.stick_until:  # not published yet: try again next cycle
            stick, stale_rev, until = a.stick, a.stale_rev, a.stick_until
        else:
            stick, stale_rev, until = None, None, 0
        return Agent(step="read", at=ctx.time + wait, cycle=a.cycle + 1, pub_n=a.pub_n, owner=a.owner, held=a.held,
                     stick=stick, stale_rev=stale_rev, stick_until=until)

    def _lost_publish(self, ctx: Context, t, a: Agent) -> Agent:
        """A publish ended ``info``: replay it identically at once (without
        reading first) or read its outcome first; maybe come back to the item
        with the lost request's revision (both drawn per cycle)."""
        plan = self._plan(ctx, t, a)
        if plan["stale_after_loss"] and a.pending and a.step == "publish":
            key = (a.pending["ledger_namespace"], a.pending["item_id"])
            a = replace(a, next_stick=self.world.agent_tuples.index(key),
                        next_stale_rev=a.pending["expected_revision"])
        if plan["replay_after_info"] and not a.replayed and a.step == "publish":
            return replace(a, step="replay-info", replayed=True, at=ctx.time)
        return replace(a, step="pub-read", recover_tries=a.recover_tries + 1, at=ctx.time)

    def _step(self, ctx: Context, t, a: Agent, ev: dict) -> tuple[Agent, tuple]:
        nxt, revs = self._agent_step(ctx, t, a, ev)
        return self._commit_step(ctx, t, a, ev, nxt), revs

    # ------------------------------------------------------------------ the cooperating agent's Git step

    def _commit_step(self, ctx: Context, t, a: Agent, ev: dict, nxt: Agent) -> Agent:
        """Git-backed ledgers (``cfg.commit``), as the contract prescribes the
        caller (§6, merge-coordinated: "The caller commits or merges the
        resulting item change and runs ``claim-verify``"): after an
        acknowledged publish the agent commits the item (the ``commit`` op),
        then, if that put the bytes into ``HEAD``, runs ``claim-verify`` on the
        namespace (the ``verify`` op: a program may record the Git finalization
        only there), then goes on as it would have."""
        if a.step == "commit":  # where the publish's reply led (``nxt`` is not: it is the commit's own step)
            if ev["type"] != "ok" or not a.after:
                return self._end_cycle(ctx, t, a, False)
            result = (ev.get("value") or {}).get("envelope", {}).get("result") or {}
            if result.get("committed") is True:
                return replace(a, step="verify", at=ctx.time)
            return replace(a.after, at=ctx.time)
        if a.step == "verify":  # whatever it answered, the publication's own cycle goes on
            return replace(a.after, at=ctx.time) if a.after else self._end_cycle(ctx, t, a, False)
        if not self.cfg.commit or ev["type"] != "ok" or a.step not in ("publish", "pub-retry", "blind-retry",
                                                                         "pub-read", "replay-info"):
            return nxt
        req = a.pending or {}
        result = ((ev.get("value") or {}).get("envelope") or {}).get("result") or {}
        if a.step == "pub-read":  # a recovered publication: its stored outcome
            result = (((result.get("outcome") or {}).get("stdout") or {}).get("result")) or {}
        rev = result.get("committed_revision")
        if not rev or not req:
            return nxt
        commit = {"ledger_namespace": result.get("ledger_namespace"), "item_id": result.get("item_id"),
                  "operation_id": req.get("operation_id"), "committed_revision": rev}
        return replace(a, step="commit", commit_req=commit, after=nxt, at=ctx.time)

    def _agent_step(self, ctx: Context, t, a: Agent, ev: dict) -> tuple[Agent, tuple]:
        typ = ev["type"]
        value = ev.get("value") or {}
        env = value.get("envelope") or {}
        result = env.get("result") or {}
        err = env.get("error") or {}
        key = self._key(ctx, t, a)
        revs = self.revisions
        step = a.step
        if step == "blind-retry":
            if typ == "ok":
                revs = self._learn(key, result.get("committed_revision"))
            if typ == "info":
                return self._end_cycle(ctx, t, a, backoff=False), revs
            return replace(a.after, at=ctx.time), revs
        if step == "publish" and typ in ("ok", "fail") and self._plan(ctx, t, a)["blind_retry"] and not a.blind_done:
            after, revs = self._step(ctx, t, replace(a, blind_done=True), ev)
            return replace(a, step="blind-retry", blind_done=True, after=after, at=ctx.time), revs
        if typ == "info":
            if step in ("publish", "pub-read", "pub-retry", "replay-info") and a.pending and a.recover_tries < 3:
                return self._lost_publish(ctx, t, a), revs
            return self._end_cycle(ctx, t, a, backoff=False), revs
        if step == "read":
            if typ == "ok" and self.cfg.skip_held and _live_claim(result.get("read_back")):
                # the acquire would be claim-held: a process-per-call program spends a second on it
                return self._end_cycle(ctx, t, a, backoff=True), revs
            if typ == "ok":
                return replace(a, step="acquire", read_back=result.get("read_back"), at=ctx.time), revs
            return self._end_cycle(ctx, t, a, backoff=True), revs
        if step == "acquire":
            if typ == "ok":
                claim = result.get("claim") or {}
                work = self._plan(ctx, t, a)["work_ms"] * MS
                held = dict(a.held)
                previous = held.get(key)  # this owner held the item before, under an older epoch
                held[key] = claim.get("epoch")
                return replace(a, step="renew", epoch=claim.get("epoch"), expires_at=claim.get("expires_at"),
                               at=ctx.time + work, held=tuple(held.items()), stale_epoch=previous), revs
            return self._end_cycle(ctx, t, a, backoff=True), revs
        if step == "renew":
            if typ == "ok":
                claim = result.get("claim") or {}
                nxt = "publish" if self.cfg.publish else "release"
                return replace(a, step=nxt, expires_at=claim.get("expires_at", a.expires_at), at=ctx.time), revs
            return self._end_cycle(ctx, t, a, backoff=True), revs
        if step == "publish" and a.stale:
            # the stale-fence attempt: a fenced backend refused it; publish with the current fence
            if typ == "ok":
                return replace(a, step="release", pending=None, stale=False, at=ctx.time), \
                    self._learn(key, result.get("committed_revision"))
            if err.get("code") == "ledger-revision-conflict":
                revs = self._learn(key, (err.get("details") or {}).get("actual_revision"))
            return replace(a, step="publish", pending=None, stale=False, at=ctx.time), revs
        if step == "publish":
            if typ == "ok":
                revs = self._learn(key, result.get("committed_revision"))
                if a.pubs_done + 1 < self._plan(ctx, t, a)["publishes"]:  # the next revision, same hold
                    return replace(a, step="publish", pending=None, pubs_done=a.pubs_done + 1, pub_tries=0,
                                   at=ctx.time), revs
                return replace(a, step="release", pending=None, at=ctx.time), revs
            if err.get("code") == "ledger-revision-conflict":
                revs = self._learn(key, (err.get("details") or {}).get("actual_revision"))
                if a.pub_tries < 1:
                    return replace(a, pub_tries=a.pub_tries + 1, at=ctx.time), revs
            if err.get("code") == "claim-fence-rejected":
                return self._end_cycle(ctx, t, a, backoff=True), revs
            return replace(a, step="release", pending=None, at=ctx.time), revs
        if step == "pub-read":
            if typ == "ok":
                rev = stored_revision(result)
                return self._end_cycle(ctx, t, a, backoff=False), self._learn(key, rev)
            if err.get("code") == "operation-not-found":
                return replace(a, step="pub-retry", at=ctx.time), revs
            return self._end_cycle(ctx, t, a, backoff=True), revs
        if step in ("pub-retry", "replay-info"):
            if typ == "ok":
                revs = self._learn(key, result.get("committed_revision"))
            return self._end_cycle(ctx, t, a, backoff=False), revs
        # release
        return self._end_cycle(ctx, t, a, backoff=False), revs


def claims_workload(seed: int, cfg: ClaimsConfig | None = None,
                    namespaces: list[str] | None = None) -> tuple[ClaimsWorkload, Universe]:
    """The client generator and the universe it works on (seed the store with
    ``world.durable()`` before the workers start). ``namespaces``: the ones the
    backend minted at provision, instead of the seed's."""
    cfg = cfg or ClaimsConfig()
    world = universe(seed, cfg, namespaces)
    return ClaimsWorkload(cfg, world), world
