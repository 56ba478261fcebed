"""The workload-coverage gate: per contract path, how often the run attempted
it and how often it completed (like the fault-coverage gate of
``chaos.nemesis.Coverage``).

A *path* is one way through the contract a client can take: acquire fresh,
over a live claim, after expiry; renew; release; a publish that commits, is
replayed, conflicts on its operation id, is fenced out for each reason, hits
a revision conflict or a floor failure; an exact lease-boundary probe; a
race; a read. Each path has an *attempt* predicate over the invoke (what the
client asked, and the ``intent`` it recorded) and a *completion* predicate
over the reply (the reply shows the path was taken: ``claim-held``, a fence
rejection with that reason, a probe decided at exactly its ``clock_ms``...).

A path is *requested* when the run's configuration makes it happen by itself:
the agents take it on every cycle (read, acquire fresh, publish ok: whenever
the run has clients; a renew or release an agent sends may fairly find its
lease expired, so those come from the racers' episodes), the final phase
takes it (a publication read of every operation id sent), or a racer
episode that takes it is in the rotation and the run reached it: the op that
takes the path was sent and answered with a decision (a floor persistence
failure or an unavailable store decided nothing). A requested path that never completed
makes an otherwise valid run ``unknown`` (the run did not exercise what it
was asked to: e.g. every probe was answered, none at its instant), as does
a run in which most operations ended ``info``. A run too short for the
rotation to reach an episode shows its paths with 0 attempts, not requested.
Paths that only faults make happen (a replay after a lost reply, a floor
failure) are counted and shown, never requested.

``coverage(history, plan) -> {path: {"requested", "attempted", "completed"}}``
is pure; ``plan`` says what the run was configured to exercise
(``plan_for(claims_config, workers, capabilities)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from backends.contract.digests import operation_digest
from backends.contract.values import parse_instant
from workloads.races import EPISODES, NO_DECISION, PROBE_OFFSETS, PROBE_OPS, probe_name

AGENTS = "agents"      # a path every agent cycle takes (and the racers' prologues)
#: in-call fault attempts (hits or misses) before its path is requested: a timed signal misses a
#: sub-millisecond call often on a loaded machine (a renew kill landed inside in 5 of 23 tries at
#: load 8), so three misses in a row were common (4-s gate runs went unknown in CI)
IN_CALL_TRIES = 6
PUBLISHED = "published"  # a path every run that sent a publish takes (the final phase reads every id)
#: the labels of a racer episode's prologue (workloads.races): not the op an episode is about
PROLOGUE = frozenset(("read", "hold", "hold-takeover"))


def intent_episode(intent: str) -> str:
    """The racer episode (or agent step family) an op's ``intent`` names:
    ``"<kind>:<label>"`` less its label."""
    return intent.rsplit(":", 1)[0] if ":" in intent else intent


@dataclass(frozen=True)
class Attempt:
    """One invoke and its completion, as the predicates see them."""

    f: str
    req: dict
    intent: str
    clock_ms: int | None
    type: str                   # ok / fail / info (info also when it never completed)
    env: dict
    previous: str | None = None  # the type of the last earlier attempt of this identical publish
    reused: str | None = None    # "same-item" / "other-item": an earlier publish used this id otherwise
    in_fsync_fault: bool = False  # invoked while the fsync nemesis had syncs failing
    fault: dict | None = None     # an in-call fault's evidence (the completion's ``fault``)

    @property
    def episode(self) -> str:
        return intent_episode(self.intent)

    @property
    def label(self) -> str:
        return self.intent.rsplit(":", 1)[-1]

    @property
    def code(self) -> str | None:
        return (self.env.get("error") or {}).get("code")

    @property
    def reason(self) -> str | None:
        return ((self.env.get("error") or {}).get("details") or {}).get("reason")

    @property
    def definite(self) -> bool:
        return self.type in ("ok", "fail")

    @property
    def decided(self) -> bool:
        """A definite reply that is the backend's decision on the request, not
        a store that could not decide (its floor or itself unavailable, §4, §8)."""
        return self.definite and self.code not in NO_DECISION

    def read_back(self) -> dict:
        """The record the reply shows (a success's read-back, a rejection's details)."""
        result = self.env.get("result") or {}
        rb = result.get("read_back") or result.get("claim_read_back") or (self.env.get("error") or {}).get("details")
        return rb if isinstance(rb, dict) else {}

    def observed_ms(self) -> int | None:
        """The backend's decision time as its reply states it."""
        at = self.read_back().get("observed_at")
        try:
            return parse_instant(at) if isinstance(at, str) else None
        except ValueError:
            return None


@dataclass(frozen=True)
class Path:
    name: str
    attempted: Callable[[Attempt], bool]
    completed: Callable[[Attempt], bool]
    by: tuple = ()      # AGENTS and the racer episodes that make it happen; () = only faults do
    publication: bool = False  # needs a backend that publishes (an advisory one refuses every publish)
    reached: Callable[[Attempt], bool] = lambda a: a.decided  # an attempt that shows the backend's answer
    min_reached: int = 1   # reached attempts before the path is requested


def _ok(a: Attempt) -> bool:
    return a.type == "ok"


def _code(code: str) -> Callable[[Attempt], bool]:
    return lambda a: a.type == "fail" and a.code == code


def _fenced(reason: str) -> Callable[[Attempt], bool]:
    return lambda a: a.type == "fail" and a.code == "claim-fence-rejected" and a.reason == reason


def _intent(*names: str) -> Callable[[Attempt], bool]:
    return lambda a: a.intent in names


def _landed(a: Attempt) -> bool:
    return a.definite and a.clock_ms is not None and a.observed_ms() == a.clock_ms


def _decided_over_a_live_claim(a: Attempt) -> bool:
    """A decided reply whose record shows the claim still active at the decision
    time it states: a forward clock skew of the deciding process can expire the
    lease first, and then the write is legal (§7) and the path was not reached."""
    if not a.decided:
        return False
    active = a.read_back().get("active")
    at = a.observed_ms()
    try:
        expires = parse_instant(active["expires_at"]) if isinstance(active, dict) else None
    except (KeyError, TypeError, ValueError):
        expires = None
    return expires is None or at is None or at < expires


#: fence reason -> the intents (or racer episodes) that aim at it
FENCE_AIMS = {
    "ledger-namespace-mismatch": ("fence-namespace:wrong-fence",),
    "item-id-mismatch": ("fence-item:wrong-fence",),
    "no-active-claim": ("publish-after-release:publish-released",),
    # (race:two-owners' old-owner publish is a race: it may lose to the new owner's write and be
    # refused for its revision first, §6 step 8 before 7 at validation; fence-owner is the aimed one)
    "owner-mismatch": ("fence-owner:wrong-fence",),
    "epoch-mismatch": ("fence-epoch:wrong-fence", "replay-after-fail:first", "stale-fence"),
    "claim-expired": (f"{probe_name('publish', 0)}:probe", f"{probe_name('publish', 1)}:probe"),
}

#: racer episode -> the op of its racing step that counts the race
RACE_STEP = {"race:takeover-vs-publish": "takeover", "race:two-owners": "publish-old-owner",
             "race:publish-vs-release": "release", "race:twin-publish": "publish-twin"}

#: frozen-call episode -> (path name, the frozen op's intents, needs a publishing backend): the path
#: completes when the freeze landed inside the call (the check-then-act gap reached)
FROZEN = {
    "frozen-publish": ("publish frozen inside its call while a rival takes over",
                       ("frozen-publish:frozen-publish", "race:twin-publish:frozen-publish"), True),
    "publish-after-release": ("takeover frozen inside its call while a rival takes over with its witness",
                              ("publish-after-release:frozen-acquire",), False),
    "stale-expiry": ("renew or release frozen inside its call while a rival uses its CAS tuple",
                     ("stale-expiry:renew", "stale-expiry:frozen-release"), False),
    "legacy-writes": ("legacy transition frozen inside its call while a rival acquires the item",
                      ("legacy-writes:frozen-legacy-transition",), False),
}


def _episodes(names) -> tuple:
    return tuple(sorted({n.split(":", 1)[0] if not n.startswith(("race:",)) else n.rsplit(":", 1)[0]
                         for n in names} & set(EPISODES)))


def _paths() -> tuple:
    acquire = lambda a: a.f == "acquire" and not _unbound(a)
    witness_active = lambda a: acquire(a) and (a.req.get("expected") or {}).get("active") is not None
    publish = lambda a: a.f == "publish" and not _unbound(a)
    definite = lambda a: a.definite
    out = [
        Path("read", lambda a: a.f == "read" and not _unbound(a), _ok, (AGENTS,)),
        Path("publication-read", lambda a: a.f == "publication-read", definite, (PUBLISHED,), True),
        Path("acquire fresh", lambda a: acquire(a) and not witness_active(a), _ok, (AGENTS,)),
        Path("acquire over a live claim", witness_active, _code("claim-held"), (probe_name("takeover", -1),)),
        Path("acquire after expiry (takeover)", witness_active, _ok,
             ("race:takeover-vs-publish", "race:two-owners", probe_name("takeover", 0))),
        Path("acquire with a stale witness", _intent("stale-witness:stale-witness"), _code("claim-conflict"),
             ("stale-witness",)),
        Path("acquire with a stale witness on an expired claim", _intent("stale-witness:stale-witness-expired"),
             _code("claim-conflict"), ("stale-witness",)),
        Path("acquire with a stale witness on a free item", _intent("publish-after-release:stale-witness-free"),
             _code("claim-conflict"), ("publish-after-release",)),
        Path("renew", lambda a: a.f == "renew", _ok, ("stale-expiry", probe_name("renew", -1))),
        Path("renew with a stale expiry", _intent("stale-expiry:stale-expiry"), _code("claim-conflict"),
             ("stale-expiry",)),
        Path("release", lambda a: a.f == "release", _ok, ("publish-after-release", probe_name("release", -1))),
        Path("publish ok", lambda a: publish(a) and a.previous is None and a.reused is None, _ok, (AGENTS,), True),
        Path("publish identical replay after ok", lambda a: publish(a) and a.previous == "ok", definite,
             ("replay-after-ok",), True),
        Path("publish identical replay after fail", lambda a: publish(a) and a.previous == "fail", definite,
             ("replay-after-fail",), True),
        Path("publish identical replay after info", lambda a: publish(a) and a.previous == "info", definite,
             (), True),
        Path("publish idempotency-conflict", lambda a: publish(a) and a.reused == "same-item",
             _code("idempotency-conflict"), ("reuse-bytes", "reuse-revision"), True),
        Path("publish reused id on another item", lambda a: publish(a) and a.reused == "other-item",
             lambda a: a.type == "fail", ("reuse-item",), True),
    ]
    for reason, aims in FENCE_AIMS.items():
        out.append(Path(f"publish fence rejected: {reason}", _intent(*aims), _fenced(reason), _episodes(aims), True))
    out += [
        Path("publish revision conflict", _intent("stale-revision:stale-revision", "stale-after-loss"),
             _code("ledger-revision-conflict"), ("stale-revision",), True),
        Path("floor persistence failure", lambda a: a.in_fsync_fault and a.f not in ("read", "publication-read"),
             lambda a: a.code == "clock-floor-persistence-failed", ()),
        Path("unbound namespace refused", _unbound, _code("ledger-namespace-unbound"), ("unbound-namespace",)),
    ]
    for op in PROBE_OPS:
        for d in PROBE_OFFSETS:
            name = probe_name(op, d)
            at = {-1: "expires_at - 1 ms", 0: "exactly expires_at", 1: "expires_at + 1 ms"}[d]
            out.append(Path(f"probe {op} at {at}", _intent(f"{name}:probe"), _landed, (name,), op == "publish"))
    for race, step in RACE_STEP.items():
        out.append(Path(race, _intent(f"{race}:{step}"), definite, (race,), True))
    out.append(Path("acquire twins: one free item, one witness, at once", _intent("publish-after-release:acquire-twin"),
                    definite, ("publish-after-release",)))
    inside = lambda a: bool((a.fault or {}).get("inside"))
    fired = lambda a: a.fault is not None
    # a signal that finds the call already answered is the harness's miss, not the backend's
    # answer: these are requested once the run made IN_CALL_TRIES attempts
    for kind, (name, intents, publication) in FROZEN.items():
        by = (kind, "race:twin-publish") if kind == "frozen-publish" else (kind,)
        out.append(Path(name, _intent(*intents), inside, by, publication, reached=fired, min_reached=IN_CALL_TRIES))
    out += [
        Path("call killed inside its work", _intent("killed-publish:killed-call", "killed-renew:killed-call"),
             inside, ("killed-publish", "killed-renew"), reached=fired, min_reached=IN_CALL_TRIES),
        Path("legacy transition refused over an active claim", _intent("legacy-writes:legacy-transition"),
             _code("active-claim-write-refused"), ("legacy-writes",), reached=_decided_over_a_live_claim),
        Path("legacy create refused for a claimed identity", _intent("legacy-writes:legacy-create"),
             _code("claimed-item-write-refused"), ("legacy-writes",)),
        Path("publish with a wrong candidate digest refused", _intent("bad-digest:bad-digest"),
             _code("candidate-digest-mismatch"), ("bad-digest",), True),
        Path("publish retry without its complete request refused", _intent("incomplete-retry:incomplete-retry"),
             _code("invalid-request"), ("incomplete-retry",), True),
        Path("publish of another item's candidate refused", _intent("invalid-candidate:invalid-candidate"),
             _code("ledger-invalid"), ("invalid-candidate",), True),
        Path("acquire at the exhausted epoch high-water mark", _intent("epoch-exhaustion:acquire-exhausted"),
             _code("epoch-exhausted"), ("epoch-exhaustion",)),
        Path("publish with a noncanonical fence refused",
             _intent(*(f"noncanonical-requests:{label}" for label in
                       ("fence-owner-grammar", "fence-epoch-past-max", "fence-owner-too-long"))),
             _code("invalid-request"), ("noncanonical-requests",), True),
        Path("claim request with a noncanonical value refused",
             _intent("noncanonical-requests:acquire-owner-grammar", "noncanonical-requests:renew-epoch-past-max"),
             _code("invalid-request"), ("noncanonical-requests",)),
        Path("publish refused before the floor step, decided days ahead",
             _intent(*(f"refusals-keep-floor:{label}" for label in
                       ("invalid-candidate-ahead", "bad-digest-ahead", "noncanonical-ahead"))),
             lambda a: a.type == "fail" and a.code in ("ledger-invalid", "candidate-digest-mismatch", "invalid-request"),
             ("refusals-keep-floor",), True),
    ]
    return tuple(out)


def _unbound(a: Attempt) -> bool:
    return a.label == "unbound"


PATHS = _paths()


def plan_for(claims: dict, workers: int, capabilities: dict | None) -> dict:
    """What a run with this ``ClaimsConfig`` (as a dict of overrides), this many
    workers and this capabilities envelope is configured to exercise."""
    from workloads.claims import ClaimsConfig

    cfg = ClaimsConfig(**claims)
    pairs_ = max(0, min(cfg.race_pairs, (workers - 2) // 2))
    mode = ((((capabilities or {}).get("result") or {}).get("operations") or {}).get("work_claim") or {}).get("mode")
    return {"agents": workers - 2 * pairs_ > 0, "publish": bool(cfg.publish) and mode != "advisory",
            "episodes": list(cfg.episodes) if pairs_ else [], "race_pairs": pairs_}


def _requested(path: Path, plan: dict, attempts_: list[Attempt]) -> bool:
    """Agents' paths: whenever the run has clients. A racer path: once the
    run reached its episode (the rotation got there in the time given) and
    the op that takes the path was answered (``reached``): from then on the
    run was configured to exercise it, and a backend that answered otherwise
    left it unexercised."""
    if not path.by or (path.publication and not plan.get("publish")):
        return False
    episodes = set(plan.get("episodes") or ())
    if AGENTS in path.by:
        return bool(plan.get("agents") or episodes)
    if PUBLISHED in path.by:
        return any(a.f == "publish" for a in attempts_)
    wanted = episodes & set(path.by)
    reached = sum(1 for a in attempts_
                  if a.episode in wanted and a.label not in PROLOGUE and path.attempted(a) and path.reached(a))
    return reached >= path.min_reached


def _fsync_windows(history: list[dict]) -> list[tuple[int, float]]:
    """``[(start, end), ...]`` of the fsync nemesis's armed windows (ns)."""
    out, start = [], None
    for op in history:
        if op.get("process") != "nemesis":
            continue
        if op.get("f") == "fsync" and op.get("type") == "invoke" and start is None:
            start = op["time"]
        elif start is not None and op.get("type") != "invoke" and (
                op.get("f") == "fsync-heal" or (op.get("f") == "heal" and (op.get("value") or {}).get("fault") == "fsync")):
            out.append((start, op["time"]))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def pairs(history) -> list[tuple[dict, dict | None]]:
    """Each client invoke with the next completion of its process (``None``
    while still open), in invoke order, raw (the ``intent``, ``clock_ms`` and
    ``fault`` members the history type does not keep)."""
    open_by_process: dict = {}
    out: list = []
    for op in history:
        if not isinstance(op, dict) or op.get("process") == "nemesis":
            continue
        if op.get("type") == "invoke":
            open_by_process[op.get("process")] = len(out)
            out.append([op, None])
        elif op.get("type") in ("ok", "fail", "info") and op.get("process") in open_by_process:
            out[open_by_process.pop(op.get("process"))][1] = op
    return [(inv, done) for inv, done in out]


def attempts(history: list[dict]) -> list[Attempt]:
    """Every client op as an ``Attempt`` (the final phase's read-back included)."""
    out: list[Attempt] = []
    windows = _fsync_windows(history)
    seen: dict[tuple, str] = {}           # (op id, digest) -> type of its last attempt
    ids: dict[str, set] = {}              # op id -> {(ns, item, digest)}
    for inv, done in pairs(history):
        done = done or {}
        f, req = inv.get("f"), inv.get("value") if isinstance(inv.get("value"), dict) else {}
        typ = done.get("type", "info")
        env = (done.get("value") or {}).get("envelope") if isinstance(done.get("value"), dict) else None
        previous = reused = None
        if f == "publish" and isinstance(req.get("operation_id"), str):
            try:
                digest = operation_digest(req)
            except (TypeError, ValueError):
                digest = None
            oid, where = req["operation_id"], (req.get("ledger_namespace"), req.get("item_id"))
            previous = seen.get((oid, digest))
            others = {k for k in ids.get(oid, ()) if k != (*where, digest)}
            if previous is None and others:
                reused = "same-item" if any(k[:2] == where for k in others) else "other-item"
            seen[(oid, digest)] = typ
            ids.setdefault(oid, set()).add((*where, digest))
        t = inv.get("time", 0)
        out.append(Attempt(f, req, inv.get("intent") or "", inv.get("clock_ms"), typ,
                           env if isinstance(env, dict) else {}, previous, reused,
                           any(lo <= t <= hi for lo, hi in windows),
                           done.get("fault") if isinstance(done.get("fault"), dict) else None))
    return out


def coverage(history: list[dict], plan: dict) -> dict:
    """``{path: {"requested", "attempted", "completed"}}`` in report order."""
    seen = attempts(history)
    table = {p.name: {"requested": _requested(p, plan, seen), "attempted": 0, "completed": 0} for p in PATHS}
    for a in seen:
        for p in PATHS:
            if p.attempted(a):
                row = table[p.name]
                row["attempted"] += 1
                row["completed"] += int(p.completed(a))
    return table


def missing(table: dict) -> list[str]:
    """Requested paths that never completed."""
    return [name for name, row in table.items() if row["requested"] and row["completed"] == 0]


def format_table(table: dict) -> str:
    """The console rendering: one line per path that was requested or attempted."""
    rows = [(n, r) for n, r in table.items() if r["requested"] or r["attempted"]]
    width = max((len(n) for n, _ in rows), default=10)
    lines = [f"  {'path':<{width}}  attempted  completed"]
    for name, r in rows:
        mark = "  <- never completed" if r["requested"] and not r["completed"] else ""
        lines.append(f"  {name:<{width}}  {r['attempted']:>9}  {r['completed']:>9}{mark}")
    return "\n".join(lines)
