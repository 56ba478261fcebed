"""The ``issue-lock`` workload: author agents following the issue-lock contract's order.

Each client thread is one author agent (username ``agent-<thread>``, profile
``author``; its token is resolved server-side). A cycle picks an issue and:

    inspect -> bootstrap (or re-lock, or recover, or a foreign takeover attempt)
            -> inspect again (verify by reading back) -> heartbeat
            -> commit, heartbeat, ... (work between them) -> create-PR

following the store's own answers: bootstrap's ``exact_next_action`` when it
refuses (recover / lock / nothing), ``inspect``'s ``recommended_action``
otherwise. Seeded per-cycle choices (``plan_cycle``) make the other paths
happen in every run:

* ``let_expire``: after a commit the agent sleeps past the TTL, heartbeats
  (expects ``lease_expired``) and renews (#760), unless someone took over;
* ``relock``: right after bootstrap the agent re-locks its still
  base-equivalent binding, then heartbeats with the OLD token (a stale
  token: must be refused) before going on with the new one;
* ``careless_head``: recovery is first tried with a wrong ``expected_head``
  (must be ``head_mismatch``) and a wrong worktree path (``binding_mismatch``);
  it is always previewed with ``dry_run`` first;
* ``foreign_recover``: an agent seeing someone else's lock tries ``recover``
  on it (``foreign_claimant`` / ``healthy_foreign_lock``); a live foreign lock
  is also tried with ``bootstrap`` (a takeover attempt, ``healthy_foreign_lock``);
* ``probe``: a recovery under a token the server cannot resolve
  (``identity_unresolved``), of an issue nobody locked (``no_durable_lock``),
  and of the agent's own canonical lock (``already_canonical``).

The universe (a pure function of the seed): repositories, issues, the
identities, and incomplete legacy locks with committed work on their branches
(the pre-#953 thin shape, a half-upgraded one whose stale top-level claimant
names someone else, an unparseable expiry, a claimant whose profile differs,
a missing worktree and one checked out on another branch). Each legacy
owner's first cycles go to its legacy issue, and no other agent starts there
(recovery gets a head start over takeovers; both still race afterwards).

After ``info`` the thread's process is retired; the agent keeps its identity
but forgets every session (a new process knows no token).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from backends.issuelock.contract import builder as B
from backends.issuelock.contract.fields import IssueKey
from workloads.generator import MS, PENDING, Context, Gen, soonest
from workloads.random import Stream

GHOST_TOKEN = "tok-ghost"            # resolves to a username without a profile
UNKNOWN_TOKEN = "tok-nobody"         # resolves to nothing
UNLOCKED_ISSUE = 1                   # no run ever locks it (issues are numbered from 100)
OWNER_HEAD_START = 3                 # a legacy owner's first cycles go to its own legacy lock
LEGACY_VARIANTS = ("thin", "half-upgraded", "unparseable-expiry", "wrong-profile", "worktree-missing",
                   "worktree-other-branch", "thin-no-generation")


@dataclass(frozen=True)
class IssueLockConfig:
    repos: int = 2
    issues: int = 5                 # per repository
    legacy_locks: int = 7           # incomplete legacy locks seeded (<= repos * issues, <= workers)
    ttl_ms: int = 2000
    work_ms: tuple = (100, 600)
    backoff_ms: tuple = (20, 200)
    commits: tuple = (1, 3)
    let_expire_rate: float = 0.25
    relock_rate: float = 0.3
    careless_head_rate: float = 0.3
    foreign_recover_rate: float = 0.4
    probe_rate: float = 0.15


def token_of(thread) -> str:
    return f"tok-agent-{thread}"


def username_of(thread) -> str:
    return f"agent-{thread}"


@dataclass(frozen=True)
class LegacySeed:
    key: IssueKey
    owner: int            # the thread whose identity owns it
    variant: str
    branch: str
    worktree: str


@dataclass(frozen=True)
class Universe:
    issues: tuple          # (IssueKey, ...)
    workers: int
    legacy: tuple          # (LegacySeed, ...)
    ttl_ms: int

    def identities(self) -> list[dict]:
        out = [{"token": token_of(t), "username": username_of(t), "profile": "author"} for t in range(self.workers)]
        return out + [{"token": GHOST_TOKEN, "username": "agent-ghost", "profile": None}]

    def legacy_of(self, thread) -> LegacySeed | None:
        return next((s for s in self.legacy if s.owner == thread), None)

    def durable(self) -> dict:
        """The seed every store gets (``backends.issuelock.seed``)."""
        repos = sorted({k.repository for k in self.issues})
        bindings, locks = [], []
        for s in self.legacy:
            who = {"username": username_of(s.owner), "profile": "author"}
            commits = [{"message": f"legacy work {i + 1} on #{s.key.issue_number}",
                        "content": f"{s.variant} work {i + 1}", "author": who} for i in range(2)]
            worktree = {"worktree-missing": "missing", "worktree-other-branch": "other-branch"}.get(s.variant, "ok")
            bindings.append({**s.key.as_request(), "branch_name": s.branch, "worktree_path": s.worktree,
                             "commits": commits, "worktree": worktree})
            locks.append({**s.key.as_request(), "lock": legacy_lock(s)})
        return {"config": {"lease_ttl_ms": self.ttl_ms}, "identities": self.identities(),
                "repositories": [{"remote": r[0], "org": r[1], "repo": r[2],
                                  "files": {"README.md": f"{r[2]}: seeded for an issue-lock run\n"}} for r in repos],
                "bindings": bindings, "locks": locks}


def legacy_lock(s: LegacySeed) -> dict:
    """The incomplete lock of one legacy seed (built by the contract's legacy builder)."""
    owner = {"username": username_of(s.owner), "profile": "author"}
    if s.variant == "wrong-profile":
        owner = dict(owner, profile="reviewer")
    lock = B.build_legacy_bootstrap_lock(s.key, s.branch, s.worktree, owner,
                                         None if s.variant == "thin-no-generation" else 1)
    if s.variant in ("half-upgraded", "unparseable-expiry"):
        # a partial upgrade: a work_lease with the real claimant, no lifecycle, and a stale top-level copy
        lock["work_lease"] = {"claimant": dict(owner), "task_session_id": None,
                              **({"expires_at": "soon"} if s.variant == "unparseable-expiry" else {})}
        lock["claimant"] = {"username": "agent-stale", "profile": "author"}
    return lock


def universe(seed: int, cfg: IssueLockConfig, workers: int) -> Universe:
    names = ("widgets", "gadgets", "gizmos", "doohickeys")
    issues = tuple(IssueKey("gitea", "acme", names[r % len(names)] + ("" if r < len(names) else str(r)), 100 + i)
                   for r in range(cfg.repos) for i in range(cfg.issues))
    s = Stream(seed, ("issuelock-universe",))
    pool = list(range(len(issues)))
    owners = list(range(workers))
    legacy = []
    for v in range(min(cfg.legacy_locks, len(issues), workers)):
        i, s = s.randint(0, len(pool) - 1)
        o, s = s.randint(0, len(owners) - 1)
        key, owner = issues[pool.pop(i)], owners.pop(o)
        tag = f"{key.repo}-{key.issue_number}-legacy"
        legacy.append(LegacySeed(key, owner, LEGACY_VARIANTS[v % len(LEGACY_VARIANTS)],
                                 f"{username_of(owner)}/issue-{key.issue_number}-legacy", f"branches/{tag}"))
    return Universe(issues, workers, tuple(legacy), cfg.ttl_ms)


#: the per-cycle choices drawn as a chance against the config's ``<name>_rate``, in draw order
CHANCES = ("let_expire", "relock", "careless_head", "foreign_recover", "probe")


def plan_cycle(seed: int, thread, cycle: int, world: Universe, cfg: IssueLockConfig) -> dict:
    """The seeded choices of one cycle of one agent."""
    issue, work, backoff, commits, chances = _cycle_draws(
        seed, thread, cycle, len(world.issues), tuple(cfg.work_ms), tuple(cfg.backoff_ms), tuple(cfg.commits))
    legacy = world.legacy_of(thread)
    if cycle < OWNER_HEAD_START and legacy is not None:   # owners go to their legacy lock first ...
        issue = world.issues.index(legacy.key)
    elif cycle == 0:                                        # ... and nobody else starts there
        seeded = {x.key for x in world.legacy}
        fresh = [i for i, k in enumerate(world.issues) if k not in seeded] or [issue]
        issue = fresh[issue % len(fresh)]
    draws = {name: x < getattr(cfg, f"{name}_rate") for name, x in zip(CHANCES, chances)}
    return {"issue": issue, "work_ms": work, "backoff_ms": backoff, "commits": commits, **draws}


@lru_cache(maxsize=4096)
def _cycle_draws(seed: int, thread, cycle: int, n_issues: int, work_ms: tuple, backoff_ms: tuple,
                 commits: tuple) -> tuple:
    """``plan_cycle``'s draws from the seed, kept: the generator asks for a cycle's plan at every op it
    considers for that thread."""
    s = Stream(seed, ("issuelock", thread, cycle))
    issue, s = s.randint(0, n_issues - 1)
    work, s = s.randint(*work_ms)
    backoff, s = s.randint(*backoff_ms)
    n_commits, s = s.randint(*commits)
    chances = []
    for _ in CHANCES:
        x, s = s.random()
        chances.append(x)
    return issue, work, backoff, n_commits, tuple(chances)


@dataclass(frozen=True)
class Agent:
    step: str = "inspect"
    at: int = 0
    cycle: int = 0
    process: object = None
    inflight: bool = False
    session: str | None = None
    old_session: str | None = None
    binding: tuple | None = None       # (branch_name, worktree_path) of the lock this agent holds
    head: str | None = None
    base: str | None = None
    commits_done: int = 0
    expired_once: bool = False
    pending: dict | None = None        # the request of the next step when the store named it
    probed: bool = False


class IssueLockWorkload(Gen):
    def __init__(self, cfg: IssueLockConfig, world: Universe, agents: tuple = ()):
        self.cfg, self.world, self.agents = cfg, world, agents

    def _with(self, agents: dict) -> "IssueLockWorkload":
        return IssueLockWorkload(self.cfg, self.world, tuple(agents.items()))

    def _plan(self, ctx: Context, thread, a: Agent) -> dict:
        return plan_cycle(ctx.seed, thread, a.cycle, self.world, self.cfg)

    def _key(self, ctx, thread, a) -> IssueKey:
        return self.world.issues[self._plan(ctx, thread, a)["issue"]]

    # ------------------------------------------------------------------ requests

    def _request(self, ctx: Context, thread, a: Agent) -> tuple[str, dict]:
        key = self._key(ctx, thread, a)
        base = {"agent_token": token_of(thread), **key.as_request()}
        step = a.step
        if step in ("inspect", "verify"):
            return "inspect", base
        if step in ("bootstrap", "takeover"):
            return "bootstrap", base
        if step == "ghost":
            token = GHOST_TOKEN if a.cycle % 2 == 0 else UNKNOWN_TOKEN  # a username without profile; nobody
            return "recover", dict(base, agent_token=token, branch_name="agent-ghost/none",
                                   worktree_path="branches/none", expected_head="0" * 40)
        if step == "no-lock":   # an issue of the same repository that nobody ever locked
            return "recover", dict(base, issue_number=UNLOCKED_ISSUE, branch_name=f"{username_of(thread)}/none",
                                   worktree_path="branches/none", expected_head="0" * 40)
        if step in ("lock", "relock"):
            branch, worktree = a.binding if step == "relock" else (a.pending["branch_name"], a.pending["worktree_path"])
            return "lock", dict(base, branch_name=branch, worktree_path=worktree)
        if step in ("heartbeat", "expire-probe"):
            return "heartbeat", dict(base, task_session_id=a.session)
        if step == "stale-probe":
            return "heartbeat", dict(base, task_session_id=a.old_session)
        if step == "renew":
            return "renew", dict(base, task_session_id=a.session)
        if step == "commit":
            n = a.commits_done + 1
            return "commit", dict(base, task_session_id=a.session, message=f"{username_of(thread)} work {n}",
                                  content=f"cycle {a.cycle} commit {n} by {username_of(thread)}")
        if step == "create-pr":
            return "create-pr", dict(base, task_session_id=a.session)
        if step in ("recover-careless", "recover-misbound", "recover-dry", "recover", "foreign-recover",
                    "own-recover"):
            p = a.pending
            head = (a.base or "0" * 40) if step == "recover-careless" else p["expected_head"]
            worktree = p["worktree_path"] + "-elsewhere" if step == "recover-misbound" else p["worktree_path"]
            return "recover", dict(base, branch_name=p["branch_name"], worktree_path=worktree,
                                   expected_head=head, dry_run=step == "recover-dry")
        raise AssertionError(step)

    # ------------------------------------------------------------------ generator

    def _table(self, ctx: Context) -> dict:
        table = dict(self.agents)
        for t in ctx.threads:
            table.setdefault(t, Agent(process=ctx.process_of[t]))
        return table

    def op(self, ctx: Context):
        table = self._table(ctx)
        cands = []
        for i, t in enumerate(ctx.threads):
            a = table[t]
            if a.inflight or t not in ctx.free:
                continue
            if a.process != ctx.process_of[t]:   # a retired process: a new one knows no session
                a = replace(Agent(process=ctx.process_of[t]), cycle=a.cycle + 1, at=a.at)
            f, req = self._request(ctx, t, a)
            op = {"process": ctx.process_of[t], "type": "invoke", "f": f, "value": req, "time": max(ctx.time, a.at)}
            cands.append((i, (op, (t, replace(a, inflight=True)))))
        if not cands:
            return PENDING
        _, (op, (t, a)) = soonest(cands)
        table[t] = a
        return op, self._with(table)

    def update(self, ctx: Context, event: dict):
        if event.get("type") == "invoke":
            return self
        t = ctx.thread_of(event.get("process"))
        table = self._table(ctx)
        if t not in table or not table[t].inflight:
            return self
        a = replace(table[t], inflight=False)
        table[t] = self._step(ctx, t, a, event)
        return self._with(table)

    # ------------------------------------------------------------------ transitions

    def _end(self, ctx, t, a: Agent, backoff: bool = True) -> Agent:
        wait = self._plan(ctx, t, a)["backoff_ms"] * MS if backoff else 0
        return Agent(step="inspect", at=ctx.time + wait, cycle=a.cycle + 1, process=a.process)

    def _go(self, ctx, a: Agent, step: str, delay_ms: int = 0, **kw) -> Agent:
        return replace(a, step=step, at=ctx.time + delay_ms * MS, **kw)

    def _after_lease(self, ctx, t, a: Agent) -> Agent:
        """The lease is ours and fresh: commit more, or propose the work."""
        plan = self._plan(ctx, t, a)
        if a.commits_done < plan["commits"]:
            return self._go(ctx, a, "commit", plan["work_ms"])
        return self._go(ctx, a, "create-pr")

    def _from_inspect(self, ctx, t, a: Agent, env: dict) -> Agent:
        plan = self._plan(ctx, t, a)
        lock = env.get("lock")
        binding = env.get("binding") or {}
        rec = env.get("recommended_action")
        own = env.get("owned_by_caller") is True
        a = replace(a, base=binding.get("base_head"))
        if plan["probe"] and not a.probed:
            return self._go(ctx, a, "ghost", probed=True)
        if lock is None:
            return self._go(ctx, a, "bootstrap")
        recover_req = {"branch_name": lock.get("branch_name") or "unknown", "expected_head":
                       binding.get("branch_head") or "0" * 40,
                       "worktree_path": lock.get("worktree_path") or "branches/unknown"}
        if not own:
            mine_by_name = (env.get("claimant") or {}).get("username") == username_of(t)
            if (plan["foreign_recover"] or mine_by_name) and a.pending is None:
                # "that is my username": the server must still refuse a claimant with another profile
                return self._go(ctx, a, "foreign-recover", pending=recover_req)
            return self._go(ctx, a, "takeover" if rec == "none" else "bootstrap")
        if rec == "recover":
            return self._go(ctx, a, "recover-careless" if plan["careless_head"] else "recover-dry",
                            pending=recover_req)
        if rec == "lock":
            return self._go(ctx, a, "lock", pending=recover_req)
        if rec == "heartbeat" and a.session and a.binding == (lock.get("branch_name"), lock.get("worktree_path")):
            return self._go(ctx, a, "heartbeat")
        if rec == "heartbeat" and binding.get("branch_head") == binding.get("base_head"):
            return self._go(ctx, a, "lock", pending=recover_req)  # our own live lock, token lost: re-lock
        if rec == "renew" and a.session:
            return self._go(ctx, a, "renew")
        if rec in ("renew", "bootstrap"):
            return self._go(ctx, a, "bootstrap")
        return self._end(ctx, t, a)

    def _took_lock(self, ctx, t, a: Agent, env: dict) -> Agent:
        lock = env.get("lock") or {}
        return self._go(ctx, a, "verify", session=env.get("task_session_id"), pending=None,
                        binding=(lock.get("branch_name"), lock.get("worktree_path")))

    def _step(self, ctx: Context, t, a: Agent, ev: dict) -> Agent:
        typ = ev["type"]
        env = (ev.get("value") or {}).get("envelope") or {}
        code = env.get("reason_code") or env.get("refusal_code")
        plan = self._plan(ctx, t, a)
        step = a.step
        if typ == "info":
            return self._end(ctx, t, a, backoff=False)
        if step == "inspect":
            return self._from_inspect(ctx, t, a, env) if typ == "ok" else self._end(ctx, t, a)
        if step == "ghost":
            return self._go(ctx, a, "no-lock")
        if step == "no-lock":
            return self._go(ctx, a, "inspect")
        if step in ("bootstrap", "takeover"):
            if typ == "ok":
                return self._took_lock(ctx, t, a, env)
            nxt = env.get("exact_next_action") or {}
            if nxt.get("op") == "recover" and nxt.get("request"):
                return self._go(ctx, a, "recover-dry", pending=nxt["request"])
            if nxt.get("op") == "lock" and nxt.get("request"):
                return self._go(ctx, a, "lock", pending=nxt["request"])
            return self._end(ctx, t, a)
        if step == "lock":
            return self._took_lock(ctx, t, a, env) if typ == "ok" else self._end(ctx, t, a)
        if step == "verify":
            if typ != "ok":
                return self._end(ctx, t, a)
            binding = env.get("binding") or {}
            if plan["relock"] and a.old_session is None and binding.get("branch_head") == binding.get("base_head"):
                return self._go(ctx, a, "relock")
            if plan["probe"] and a.pending is None and env.get("contract") == "canonical":
                return self._go(ctx, a, "own-recover", pending={"branch_name": a.binding[0],
                                                                "worktree_path": a.binding[1],
                                                                "expected_head": binding.get("branch_head")
                                                                or "0" * 40})
            return self._go(ctx, a, "heartbeat")
        if step == "relock":
            if typ == "ok":
                return self._go(ctx, a, "stale-probe", old_session=a.session, session=env.get("task_session_id"))
            return self._end(ctx, t, a)
        if step == "stale-probe":
            return self._go(ctx, a, "heartbeat")
        if step == "own-recover":
            return self._go(ctx, a, "heartbeat" if a.session else "bootstrap", pending=a.pending)
        if step == "foreign-recover":
            return self._go(ctx, a, "bootstrap", pending=a.pending)
        if step in ("heartbeat", "renew"):
            if typ == "ok":
                return self._after_lease(ctx, t, a)
            if code == "lease_expired":
                return self._go(ctx, a, "renew")
            if code == "lease_not_expired":
                return self._go(ctx, a, "heartbeat")
            return self._end(ctx, t, a)
        if step == "expire-probe":
            return self._go(ctx, a, "renew" if code == "lease_expired" else "heartbeat") if typ != "ok" \
                else self._after_lease(ctx, t, a)
        if step == "commit":
            if typ == "ok":
                a = replace(a, commits_done=a.commits_done + 1)
                if plan["let_expire"] and not a.expired_once:
                    return self._go(ctx, a, "expire-probe", self.world.ttl_ms + 300, expired_once=True)
                return self._go(ctx, a, "heartbeat", plan["work_ms"])
            if code == "lease_expired":
                return self._go(ctx, a, "renew")
            return self._end(ctx, t, a)
        if step == "create-pr":
            if code == "lease_expired":
                return self._go(ctx, a, "renew")
            return self._end(ctx, t, a)
        if step == "recover-careless":
            return self._go(ctx, a, "recover-misbound")
        if step == "recover-misbound":
            return self._go(ctx, a, "recover-dry")
        if step == "recover-dry":
            return self._go(ctx, a, "recover") if typ == "ok" else self._end(ctx, t, a)
        if step == "recover":
            return self._took_lock(ctx, t, a, env) if typ == "ok" else self._end(ctx, t, a)
        raise AssertionError(step)


def issuelock_workload(seed: int, cfg: IssueLockConfig | None, workers: int) -> tuple[IssueLockWorkload, Universe]:
    cfg = cfg or IssueLockConfig()
    world = universe(seed, cfg, workers)
    return IssueLockWorkload(cfg, world), world
