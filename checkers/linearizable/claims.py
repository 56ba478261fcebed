"""The claim model: one register per ``(ledger_namespace, item_id)``, and the checker.

State of one register (a hashable tuple):
``(last_epoch, active, revision, floor, outcomes)``

* ``active``: ``(owner_id, epoch, issued_at, expires_at)`` or ``None``. Times
  are ints (ms) once a reply showed them. An op that ended ``info`` took
  effect at an instant no reply showed, so what it set is ``Pending(lease,
  lo, hi)``: the expiry is ``t + lease`` for the unseen decision time ``t``
  in ``[lo, hi)`` (and an acquire's ``issued_at`` is ``t`` itself, ``None``
  until bound). The first reply that shows the claim binds it, and must fit.
* ``revision``: the ledger revision, or ``UNBOUND`` until a reply reveals it
  (the seeded bytes are not known to the checker unless ``ctx`` says).
* ``floor``: the latest decision time linearized on this item. Time is the
  backend's own decision time stated IN each reply (``observed_at``), never
  a worker's clock: decisions persist the floor, so decision times never go
  back along the linearization (reads report it but persist nothing).
  Decisions on other items of the namespace can only raise the real floor,
  so this is a sound lower bound.
* ``outcomes``: what may be stored per publication ``operation_id``, sorted
  ``(operation_id, alternatives, seen)``: ``seen`` counts the partition's ops
  naming that id linearized so far (the entry goes once all are, since no
  later op can ask); each alternative is ``ABSENT`` (nothing
  stored) or ``(digest, spec, env_id | None)``: ``spec`` is what was decided
  (see ``claim_ops``), ``env_id`` the stored envelope's identity, ``None``
  while an ``info`` publish stored it and no replay or ``publication-read``
  has shown it yet. One entry holds every alternative the history has not
  decided between (a revision conflict may or may not have been stored), so
  outcomes nobody reads back never multiply the states.

The model is exact about indeterminate operations (``NondeterministicModel``,
power set): an ``info`` op took effect exactly once, at some instant between
its invoke and the end of the run, or never. Its effect, and any outcome it
stores, is the one the contract prescribes for the register's state at that
instant (§5, §6): a publish stores a fence rejection with the reason and the
active owner/epoch of that state, a revision conflict whose details are the
request's expected revision and the revision of that state, or a success
writing its candidate. A stored outcome that no such instant produces - say a
``ledger-revision-conflict`` naming the candidate as expected and the
request's own expected revision as actual - has no linearization. A definite
refusal (``state: "unchanged"``) is taken at its word: it changed nothing.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import replace
from operator import itemgetter
from typing import Any, NamedTuple

from backends.api import EPOCH_MAX
from backends.contract import format_instant

from .checker import ILLEGAL, OK, Budget, check_operations
from .claim_ops import active_tuple, instant_ms, register_operations
from .model import UNKNOWN, NondeterministicModel, Operation
from .witness import MIN_SEGMENT, check_register

UNBOUND = "<unbound>"
ANY = "<any>"  # a detail of a prescribed outcome the history has not revealed
NEVER = 1 << 62  # no upper bound on an unseen decision time
State = tuple


class Pending(NamedTuple):
    """An expiry set at an unseen decision time ``t`` in ``[lo, hi)``: ``t + lease``."""

    lease: int
    lo: int
    hi: int


# --------------------------------------------------------------------------- binding what a reply shows


def _bind_active(act: tuple | None, shown: tuple | None) -> tuple | None | bool:
    """``act`` with its unseen times taken from ``shown``; False if they cannot be."""
    if act is None or shown is None:
        return act if act is shown else False
    if act[0] != shown[0] or act[1] != shown[1]:
        return False
    issued, exp = act[2], act[3]
    if type(exp) is Pending:
        t = shown[3] - exp.lease
        if not exp.lo <= t < exp.hi:
            return False
        if issued is None:
            return shown if shown[2] == t else False
    elif exp != shown[3]:
        return False
    return shown if issued == shown[2] else False


def _bind(le: int, act: tuple | None, shown: tuple | None) -> tuple | None | bool:
    """The record ``(le, act)`` bound to a shown ``(last_epoch, active)``; False on mismatch."""
    if shown is None:
        return act
    if shown[0] != le:
        return False
    return _bind_active(act, shown[1])


def _bind_expiry(act: tuple, x: int) -> tuple | bool:
    """``act`` whose expiry is said to be ``x`` (a CAS tuple's expected expiry); False if it cannot be."""
    issued, exp = act[2], act[3]
    if type(exp) is Pending:
        t = x - exp.lease
        if not exp.lo <= t < exp.hi:
            return False
        return (act[0], act[1], t if issued is None else issued, x)
    return act if exp == x else False


def _expired(act: tuple, t: int) -> bool | None:
    """Is ``act`` expired at time ``t`` (True / False / None: unknown)?"""
    exp = act[3]
    if type(exp) is Pending:
        if t >= exp.hi - 1 + exp.lease:
            return True
        return False if t < exp.lo + exp.lease else None
    return t >= exp


ABSENT = "<absent>"  # the alternative "nothing is stored under this operation_id"
_first = itemgetter(0)
NOTHING = frozenset((ABSENT,))


def _alts(outs: tuple, op_id: str) -> tuple[frozenset, int]:
    """What may be stored under ``op_id`` (``ABSENT`` and/or ``(digest, spec,
    env_id)``), and how many of the partition's ops naming it are linearized."""
    i = bisect_left(outs, op_id, key=_first)
    if i < len(outs) and outs[i][0] == op_id:
        return outs[i][1], outs[i][2]
    return NOTHING, 0


def _put(outs: tuple, op_id: str, alts: frozenset, seen: int, refs: int) -> tuple:
    """``outs`` (sorted by operation id) after one more op naming ``op_id``. Once
    every op of the partition naming it is linearized, no later op can ask: the
    entry goes (exact, and it keeps states small in long histories). By bisection,
    not a sort per step: a busy partition's search takes this step a million times."""
    i = bisect_left(outs, op_id, key=_first)
    rest = outs[i + 1:] if i < len(outs) and outs[i][0] == op_id else outs[i:]
    return outs[:i] + ((op_id, alts, seen + 1),) + rest if seen + 1 < refs else outs[:i] + rest


def _merged(s: State, inp: tuple, results: list) -> list[State]:
    """Successor states from per-alternative results ``(le, act, rev, floor, alts)``:
    states that differ only in what ``op_id`` may have stored become one state
    whose entry holds every alternative (exact: the outcome of one operation id
    is a fact of its own), so unresolved outcomes never multiply the states."""
    outs = s[4]
    op_id, refs = inp[1], inp[-1]
    _, seen = _alts(outs, op_id)
    by_rest: dict = {}
    for le, act, rev, floor, alts in results:
        by_rest.setdefault((le, act, rev, floor), set()).update(alts)
    return [(le, act, rev, floor, _put(outs, op_id, frozenset(alts), seen, refs))
            for (le, act, rev, floor), alts in by_rest.items()]


def _fits(prescribed: tuple, shown: tuple | None) -> bool:
    """A revealed outcome spec matches the one an ``info`` publish stored."""
    return shown is not None and len(shown) == len(prescribed) and all(
        p == ANY or p == v for p, v in zip(prescribed, shown))


# --------------------------------------------------------------------------- claim ops


def _claim_decision(kind: str, inp: tuple, le: int, act: tuple | None, t: int) -> str:
    """The engine's code for a claim op against a fully known record at time ``t``."""
    if kind == "acquire":
        if inp[3] != le or inp[4] != act:
            return "claim-conflict"
        if act is not None and t < act[3]:
            return "claim-held"
        return "epoch-exhausted" if le >= EPOCH_MAX else "ok"
    _, owner, epoch, expected_expires, _ = inp
    if act is None or act[0] != owner or act[1] != epoch or act[3] != expected_expires:
        return "claim-conflict"
    return "claim-expired" if t >= act[3] else "ok"


def _claim_ok(s: State, inp: tuple, out: tuple) -> list[State]:
    le, act, rev, floor, outs = s
    _, t, rec, claim = out
    kind = inp[0]
    if kind == "acquire":
        witness = _bind(le, act, (inp[3], inp[4])) if inp[3] == le else False
        if witness is False or (witness is not None and t < witness[3]) or le >= EPOCH_MAX:
            return []
        new = (inp[1], le + 1, t, t + inp[2])
        return [(le + 1, new, rev, t, outs)] if claim == new and rec == (le + 1, new) else []
    _, owner, epoch, expected_expires, lease = inp
    if act is None or act[0] != owner or act[1] != epoch:
        return []
    bound = _bind_expiry(act, expected_expires)
    if bound is False or t >= expected_expires:
        return []
    if kind == "renew":
        new = (owner, epoch, bound[2], t + lease)
        return [(le, new, rev, t, outs)] if claim == new and rec == (le, new) else []
    return [(le, None, rev, t, outs)] if claim == bound and rec == (le, None) else []


def _claim_info(s: State, inp: tuple) -> list[State]:
    """Every effect the op could have had at an unseen instant (or none)."""
    le, act, rev, floor, outs = s
    kind = inp[0]
    if kind == "acquire":
        bound = _bind(le, act, (inp[3], inp[4])) if inp[3] == le else False
        if bound is False or le >= EPOCH_MAX:
            return [s]
        lo = floor if bound is None else max(floor, bound[3])  # a takeover decides at or after the expiry
        return [s, (le + 1, (inp[1], le + 1, None, Pending(inp[2], lo, NEVER)), rev, floor, outs)]
    _, owner, epoch, expected_expires, lease = inp
    if act is None or act[0] != owner or act[1] != epoch or floor >= expected_expires:
        return [s]  # a CAS mismatch, or already expired at any time it could have been decided
    bound = _bind_expiry(act, expected_expires)
    if bound is False:
        return [s]
    if kind == "renew":
        return [s, (le, (owner, epoch, bound[2], Pending(lease, floor, expected_expires)), rev, floor, outs)]
    return [s, (le, None, rev, floor, outs)]


# --------------------------------------------------------------------------- publication


def _fence_reason(inp: tuple, act: tuple | None, t: int | None) -> str | None:
    """The engine's fence verdict at ``t`` (None: passes); ``t=None`` or an
    unseen expiry: the expiry is not judged."""
    static, owner, epoch = inp[5], inp[6], inp[7]
    if static is not None:
        return static
    if act is None:
        return "no-active-claim"
    if act[0] != owner:
        return "owner-mismatch"
    if act[1] != epoch:
        return "epoch-mismatch"
    if t is not None and _expired(act, t) is True:
        return "claim-expired"
    return None


def _owner_epoch(act: tuple | None) -> tuple:
    return (None, None) if act is None else (act[0], act[1])


def _info_publish(le: int, act, rev: str, floor: int, inp: tuple) -> list[tuple]:
    """What an unseen publish decision could have done, by the state it met (§6 steps 7-9)."""
    dg, expected_rev, candidate = inp[2], inp[3], inp[4]
    unchanged = {ABSENT}  # it never ran, or was refused before the commit boundary (nothing stored)
    reason = _fence_reason(inp, act, None)
    if reason is not None:
        unchanged.add((dg, ("claim-fence-rejected", reason, *_owner_epoch(act)), None))
        return [(le, act, rev, floor, unchanged)]
    unchanged.add((dg, ("claim-fence-rejected", "claim-expired", act[0], act[1]), None))  # the lease ran out first
    if _expired(act, floor) is True:
        return [(le, act, rev, floor, unchanged)]
    out = []
    if rev in (UNBOUND, expected_rev):
        out.append((le, act, candidate, floor, {(dg, ("ok", candidate, le, act[0], act[1]), None)}))
    if rev != expected_rev:
        unchanged.add((dg, ("ledger-revision-conflict", expected_rev, ANY if rev == UNBOUND else rev), None))
    out.append((le, act, rev, floor, unchanged))
    return out


def _publish_given(le: int, act, rev: str, floor: int, inp: tuple, out: Any, alt) -> list[tuple]:
    """The publish, given what was stored under its operation_id before (``alt``)."""
    dg, expected_rev, candidate = inp[2], inp[3], inp[4]
    if out is UNKNOWN:
        return [(le, act, rev, floor, {alt})] if alt is not ABSENT else _info_publish(le, act, rev, floor, inp)
    code, t, rec, payload = out
    if code == "idempotency-conflict":
        if alt is ABSENT:
            # nothing stored under this tuple: a backend that keys operation ids by the id alone
            # refuses an id already bound on another item (vectors.md keys by the triple, the
            # contract's text allows both); the idempotence checker proves that binding exists
            return [(le, act, rev, floor, {alt})] if payload[0] != dg else []
        return [(le, act, rev, floor, {alt})] if alt[0] != dg and payload[0] == alt[0] else []
    if code == "ok":
        committed, env_id, spec, fence_echo = payload
    elif code == "claim-fence-rejected":
        reason, a_owner, a_epoch, env_id, s_owner, s_epoch = payload
        spec = (code, reason, a_owner, a_epoch)
    else:  # ledger-revision-conflict
        actual, env_id, d_expected = payload
        spec = (code, d_expected, actual)
    if alt is not ABSENT:  # a replay: the stored envelope verbatim, old observed_at and all
        stored_dg, stored_spec, stored_env = alt
        if stored_dg != dg:
            return []  # a different request under a stored id gets idempotency-conflict
        if stored_env is None:
            return [(le, act, rev, floor, {(dg, spec, env_id)})] if _fits(stored_spec, spec) else []
        return [(le, act, rev, floor, {alt})] if stored_env == env_id else []
    stored = (dg, spec, env_id)
    if code == "ledger-revision-conflict":
        # details name the request's expected revision and the durable one, which differ (§6 step 8)
        if d_expected != expected_rev or actual is None or actual == expected_rev or rev not in (UNBOUND, actual):
            return []
        # refused at validation time (not stored), or inside the commit boundary (stored)
        may_store = _fence_reason(inp, act, None) is None and _expired(act, floor) is not True
        return [(le, act, actual, floor, {ABSENT, stored} if may_store else {ABSENT})]
    if t < floor:
        return []
    if code == "claim-fence-rejected":
        if (a_owner, a_epoch) != _owner_epoch(act) or (s_owner, s_epoch) != (inp[6], inp[7]):
            return []
        expected_reason = _fence_reason(inp, act, t)
        unseen_expiry = expected_reason is None and act is not None and _expired(act, t) is None
        if not (reason == expected_reason or (unseen_expiry and reason == "claim-expired")):
            return []
        return [(le, act, rev, t, {stored})]
    # fresh success
    bound = _bind(le, act, rec)
    if bound is False or _fence_reason(inp, bound, t) is not None or rev not in (UNBOUND, expected_rev):
        return []
    if committed != candidate or not fence_echo:
        return []
    return [(le, bound, candidate, t, {stored})]


def _publish(s: State, inp: tuple, out: Any) -> list[State]:
    le, act, rev, floor, outs = s
    results = []
    for alt in _alts(outs, inp[1])[0]:
        results += _publish_given(le, act, rev, floor, inp, out, alt)
    return _merged(s, inp, results)


def _publication_read(s: State, inp: tuple, out: tuple) -> list[State]:
    le, act, rev, floor, outs = s
    alts, seen = _alts(outs, inp[1])
    if out[0] == "operation-not-found":
        return [(le, act, rev, floor, _put(outs, inp[1], NOTHING, seen, inp[-1]))] if ABSENT in alts else []
    dg, _succeeded, env_id, spec = out[3]
    for alt in alts:
        if alt is not ABSENT and alt[0] == dg and (alt[2] == env_id if alt[2] is not None else _fits(alt[1], spec)):
            return [(le, act, rev, floor, _put(outs, inp[1], frozenset(((dg, spec, env_id),)), seen, inp[-1]))]
    return []


# --------------------------------------------------------------------------- the step


def claim_step(s: State, inp: tuple, out: Any) -> list[State]:
    """Every state the register can be in after this op, given its reply; [] = impossible."""
    kind = inp[0]
    if kind == "publish":
        return _publish(s, inp, out)
    if out is UNKNOWN:
        return [s] if kind in ("read", "pread") else _claim_info(s, inp)
    if kind == "pread":
        return _publication_read(s, inp, out)
    le, act, rev, floor, outs = s
    code, t, rec, _ = out
    if t < floor:
        return []  # decision time went back past a persisted decision
    if kind == "read":
        bound = _bind(le, act, rec)
        return [] if bound is False else [(le, bound, rev, floor, outs)]
    if code == "ok":
        return _claim_ok(s, inp, out)
    bound = _bind(le, act, rec)  # rejections show the unchanged record
    if bound is False or _claim_decision(kind, inp, le, bound, t) != code:
        return []
    return [(le, bound, rev, t, outs)]


def _describe_state(s: State) -> str:
    le, act, rev, floor, outs = s
    claim = "none" if act is None else f"{act[0]}@{act[1]} [{_instant(act[2])}, {_instant(act[3])})"
    return (f"last_epoch={le} active={claim} revision={rev[:19]} floor={_instant(floor)} "
            f"outcomes={sum(1 for _, alts, _seen in outs if ABSENT not in alts)}")


def _instant(ms) -> str:
    """Backend times as the contract writes them (ms since the epoch otherwise unreadable)."""
    if type(ms) is Pending:
        return f"t+{ms.lease}ms, t in [{_instant(ms.lo)}, {'...' if ms.hi >= NEVER else _instant(ms.hi)})"
    return format_instant(ms) if isinstance(ms, int) and ms > 0 else str(ms)


def claim_model() -> NondeterministicModel:
    """The register model (fresh tuples; ``check`` swaps ``init`` per partition for seeded ones)."""

    def partition(ops: list[Operation]) -> list[list[Operation]]:  # by (ns, item)
        groups: dict[Any, list[Operation]] = {}
        for op in ops:
            groups.setdefault(op.metadata[2], []).append(op)
        return list(groups.values())

    return NondeterministicModel(
        init=lambda: [(0, None, UNBOUND, 0, ())],
        step=claim_step,
        partition=partition,
        describe_operation=lambda i, o: f"{i[0]}({_args(i[1:])}) -> {'?' if o is UNKNOWN else o[0]}",
        describe_state=_describe_state,
        name="work-claim-register",
    )


def _args(values) -> str:
    """An op's model input as ``agent-p5, 1500, (agent-p4, 1, ...)``, digests cut to 8 hex digits
    (a Python tuple's repr read as noise in every explanation)."""
    def one(v) -> str:
        if isinstance(v, tuple):
            return f"({_args(v)})"
        if isinstance(v, str) and v.startswith("sha256:") and len(v) == 71:
            return v[:15] + "…"
        return "null" if v is None else str(v)
    return ", ".join(one(v) for v in values)


def initial_states(durable: dict | None) -> dict:
    """A manifest-shaped ``durable`` dict (claims, ledgers, clock_floors) -> starting states."""
    if not durable:
        return {}
    floors = {f["ledger_namespace"]: instant_ms(f["observed_at"]) for f in durable.get("clock_floors", [])}
    states: dict = {}
    for led in durable.get("ledgers", []):
        key = (led["ledger_namespace"], led["item_id"])
        states[key] = (0, None, led.get("revision", UNBOUND), floors.get(key[0], 0), ())
    for c in durable.get("claims", []):
        key = (c["ledger_namespace"], c["item_id"])
        _, _, rev, floor, _ = states.get(key, (0, None, UNBOUND, floors.get(key[0], 0), ()))
        states[key] = (int(c["last_epoch"]), active_tuple(c.get("active")), rev, floor, ())
    return states


# --------------------------------------------------------------------------- the checker


def check(history, ctx: dict) -> dict:
    """Linearizability of a claim-chaos history, one register per (namespace, item).

    ``ctx`` may hold ``timeout`` (seconds, default 60), ``initial_durable``
    (the manifest-shaped initial durable state the runner seeded; ``durable``
    is accepted too) and
    ``initial_revisions`` (``{"ns/item": revision}``). Without them every tuple
    starts fresh with its ledger revision unbound (learnt from the replies).
    ``linearizable_budget`` (``Budget.from_mapping``) bounds each tuple's
    search; a tuple over it is ``unknown`` with the reason. Each tuple is
    checked witness-first (``witness.check_register``: info windows closed
    by evidence, windows cut at quiet points, the whole search only where a
    window fails); ``linearizable_witness: False`` runs the plain search
    over the whole tuple instead (the oracle the tests compare with).

    One register at a time: its operations are built, searched and dropped,
    so memory holds one partition's search, not the whole history's.
    """
    starts = initial_states(ctx.get("initial_durable") or ctx.get("durable"))
    for name, rev in (ctx.get("initial_revisions") or {}).items():
        key = tuple(name.split("/", 1))
        le, act, _, floor, outs = starts.get(key, (0, None, UNBOUND, 0, ()))
        starts[key] = (le, act, rev, floor, outs)
    budget = Budget.from_mapping(ctx.get("linearizable_budget"))  # per (namespace, item)
    witness = ctx.get("linearizable_witness", True)  # False: the plain search over each whole partition
    window = ctx.get("linearizable_window", MIN_SEGMENT)  # ops per window at least
    base = claim_model().to_model()
    fresh: State = (0, None, UNBOUND, 0, ())
    summaries, anomalies, unknown = [], [], []
    verdict, op_count = OK, 0
    for key, part in register_operations(history):
        op_count += len(part)
        start = starts.get(key, fresh)
        if witness:
            res, how = check_register(base, start, part, ctx.get("timeout", 60), budget, window)
        else:
            model = replace(base, init=lambda start=start: frozenset([start]), partition=None)
            res, how = check_operations(model, part, timeout=ctx.get("timeout", 60), budget=budget), None
        if res.result == ILLEGAL:
            verdict = ILLEGAL
            anomalies.append(_anomaly(key, part, res))
        elif res.result != OK and verdict == OK:
            verdict = "unknown"
        unknown += [f"{key[0]}/{key[1]}: {reason}" for reason in res.reasons]
        p = res.partitions[0] if res.partitions else None
        summaries.append({"ledger_namespace": key[0], "item_id": key[1], "ops": len(part), "result": res.result,
                          "configurations": p.configurations if p else 0,
                          **({"windows": how.segments, "pinned": how.pinned, "info_closed": how.info_closed,
                             "info_deferred": how.info_deferred} if how else {}),
                          **({"reason": p.reason} if p and p.reason else {})})
    return {
        "valid": {OK: True, ILLEGAL: False}.get(verdict, "unknown"),
        "model": "work-claim-register",
        "op_count": op_count,
        "partitions": summaries,
        "anomalies": anomalies,
        **({"unknown_reasons": unknown[:20]} if unknown else {}),
    }


def _anomaly(key: tuple, part: list[Operation], res: Any) -> dict:
    """The minimal explanation: the longest legal prefix, and the ops none of which can follow it."""
    ex = res.partitions[0].explanation
    invoke = [op.metadata[0] for op in part]
    named = ex.stuck + ([ex.first_return] if ex.first_return is not None else [])
    return {
        "type": "nonlinearizable",
        "explanation": (f"No order of the {len(part)} ops on {key[0]}/{key[1]} is consistent with their replies "
                        f"and real-time order: " + ex.text(lambda i: f"#{invoke[i]}") + ". Every reply, and the "
                        "single effect an indeterminate op had at some instant before the run ended (or never), must "
                        "fit one order of the tuple's ops (contract §5, §6, §8)."),
        "ops": sorted({m for i in named for m in part[i].metadata[:2] if m is not None}),
        "data": {
            "ledger_namespace": key[0], "item_id": key[1],
            "longest_linearization": [invoke[i] for i in ex.prefix],
            "state_after_it": ex.state_text,
            "not_linearizable_after_it": [invoke[i] for i in ex.stuck],
            "first_to_return": None if ex.first_return is None else invoke[ex.first_return],
        },
    }
