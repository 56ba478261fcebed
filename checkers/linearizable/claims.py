"""The claim model: one register per ``(ledger_namespace, item_id)``, and the checker.

State of one register (a hashable tuple):
``(last_epoch, active, revision, floor, outcomes)``

* ``active``: ``(owner_id, epoch, issued_at, expires_at)`` or ``None``; a time
  is ``None`` when the op that set it ended ``info`` (its decision time was
  never seen) and is bound by the first reply that shows it.
* ``revision``: the ledger revision, or ``UNBOUND`` until a reply reveals it
  (the seeded bytes are not known to the checker unless ``ctx`` says).
* ``floor``: the latest decision time linearized on this item. Time is the
  backend's own decision time stated IN each reply (``observed_at``), never
  a worker's clock: decisions persist the floor, so decision times never go
  back along the linearization (reads report it but persist nothing).
  Decisions on other items of the namespace can only raise the real floor,
  so this is a sound lower bound.
* ``outcomes``: stored publication outcomes, sorted ``(operation_id, digest,
  succeeded, envelope | None)``; ``None`` = stored by an ``info`` publish,
  bound by the first replay or ``publication-read``.

The model is nondeterministic (``NondeterministicModel``, power set): an
``info`` op (or an uncertain exit 6) may have had any of its possible effects
at an unknown time, and is never rejected; a ``ledger-revision-conflict`` may
be the unstored validation-time refusal or the stored commit-time one. So a
correct backend's history is always linearizable, while e.g. a publish
accepted under a fence whose epoch is not the active one (or after expiry),
or two unexpired owners, has no linearization.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backends.api import EPOCH_MAX
from backends.contract import format_instant

from .checker import ILLEGAL, OK, Budget, check_operations
from .claim_ops import active_tuple, history_to_operations, instant_ms
from .model import UNKNOWN, NondeterministicModel, Operation

UNBOUND = "<unbound>"
State = tuple


# --------------------------------------------------------------------------- binding what a reply shows


def _bind_active(act: tuple | None, shown: tuple | None) -> tuple | None | bool:
    """``act`` with its unknown times taken from ``shown``; False if they disagree."""
    if act is None or shown is None:
        return act if act is shown else False
    if act[0] != shown[0] or act[1] != shown[1]:
        return False
    if (act[2] is not None and act[2] != shown[2]) or (act[3] is not None and act[3] != shown[3]):
        return False
    return shown


def _bind(le: int, act: tuple | None, shown: tuple | None) -> tuple | None | bool:
    """The record ``(le, act)`` bound to a shown ``(last_epoch, active)``; False on mismatch."""
    if shown is None:
        return act
    if shown[0] != le:
        return False
    return _bind_active(act, shown[1])


def _with_outcome(outs: tuple, entry: tuple) -> tuple:
    return tuple(sorted([o for o in outs if o[0] != entry[0]] + [entry], key=lambda o: (o[0], o[1])))


def _stored(outs: tuple, op_id: str) -> tuple | None:
    for o in outs:
        if o[0] == op_id:
            return o
    return None


#: the 5th member of an outcome that may or may not be stored (an unstored
#: validation-time revision conflict, or an ``info`` publish that may not have
#: been decided): one state instead of two, resolved only when the operation id
#: is observed again (a replay, another request under it, a publication read).
#: Forking at once would double the state set per such op and never merge it.
MAYBE = "maybe"


def _resolved(s: State, op_id: str) -> list[State] | None:
    """The two readings of a MAYBE outcome of ``op_id`` (stored, absent), or None."""
    le, act, rev, floor, outs = s
    entry = _stored(outs, op_id)
    if entry is None or len(entry) < 5:
        return None
    kept = tuple(o for o in outs if o[0] != op_id)
    return [(le, act, rev, floor, _with_outcome(kept, entry[:4])), (le, act, rev, floor, kept)]


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
        if witness is False or (act is not None and witness[3] is not None and t < witness[3]) or le >= EPOCH_MAX:
            return []
        new = (inp[1], le + 1, t, t + inp[2])
        return [(le + 1, new, rev, t, outs)] if claim == new and rec == (le + 1, new) else []
    _, owner, epoch, expected_expires, lease = inp
    if act is None or act[0] != owner or act[1] != epoch or act[3] not in (None, expected_expires):
        return []
    if t >= expected_expires:
        return []
    if kind == "renew":
        issued = act[2] if act[2] is not None else claim[2]
        new = (owner, epoch, issued, t + lease)
        return [(le, new, rev, t, outs)] if claim == new and rec == (le, new) else []
    released = _bind_active((owner, epoch, act[2], expected_expires), claim)
    return [(le, None, rev, t, outs)] if released and rec == (le, None) else []


def _claim_info(s: State, inp: tuple) -> list[State]:
    """Any effect the op could have had at an unknown time >= floor (or none)."""
    le, act, rev, floor, outs = s
    kind = inp[0]
    if kind == "acquire":
        if inp[3] != le or _bind_active(act, inp[4]) is False or le >= EPOCH_MAX:
            return [s]
        return [s, (le + 1, (inp[1], le + 1, None, None), rev, floor, outs)]
    _, owner, epoch, expected_expires, _ = inp
    if act is None or act[0] != owner or act[1] != epoch or act[3] not in (None, expected_expires):
        return [s]
    if floor >= expected_expires:
        return [s]  # already expired at any time it could have been decided
    if kind == "renew":
        return [s, (le, (owner, epoch, act[2], None), rev, floor, outs)]
    return [s, (le, None, rev, floor, outs)]


# --------------------------------------------------------------------------- publication


def _fence_reason(inp: tuple, act: tuple | None, t: int | None) -> str | None:
    """The engine's fence verdict; ``None`` = passes. ``t=None``: time unknown."""
    _, _, _, _, _, fence_here, owner, epoch = inp
    if not fence_here:
        return "fence-elsewhere"  # namespace or item mismatch; the exact reason is checked by shape checkers
    if act is None:
        return "no-active-claim"
    if act[0] != owner:
        return "owner-mismatch"
    if act[1] != epoch:
        return "epoch-mismatch"
    if t is not None and act[3] is not None and t >= act[3]:
        return "claim-expired"
    return None


def _publish(s: State, inp: tuple, out: Any) -> list[State]:
    views = _resolved(s, inp[1])
    if views is not None:
        return [x for v in views for x in _publish(v, inp, out)]
    le, act, rev, floor, outs = s
    op_id, dg, expected_rev, candidate = inp[1], inp[2], inp[3], inp[4]
    stored = _stored(outs, op_id)
    if out is UNKNOWN:
        if stored is not None:
            return [s]
        states = [(le, act, rev, floor, _with_outcome(outs, (op_id, dg, False, None, MAYBE)))]
        definitely_expired = act is not None and act[3] is not None and floor >= act[3]
        if _fence_reason(inp, act, None) is None and not definitely_expired and rev in (UNBOUND, expected_rev):
            states.append((le, act, candidate, floor, _with_outcome(outs, (op_id, dg, True, None))))
        return states
    code, t, rec, payload = out
    envelope = payload[-1]
    if code == "idempotency-conflict":
        return [s] if stored is not None and stored[1] != dg and payload[0] == stored[1] else []
    if stored is not None:  # a replay: the stored envelope verbatim, old observed_at and all
        if stored[1] != dg or stored[2] != (code == "ok"):
            return []
        if stored[3] is None:
            return [(le, act, rev, floor, _with_outcome(outs, (op_id, dg, stored[2], envelope)))]
        return [s] if stored[3] == envelope else []
    if code == "ledger-revision-conflict":
        actual = payload[0]
        if actual == expected_rev or rev not in (UNBOUND, actual):
            return []
        # a validation-time refusal (not stored) or a stored commit-time one
        return [(le, act, actual, floor, _with_outcome(outs, (op_id, dg, False, envelope, MAYBE)))]
    if t < floor:
        return []
    if code == "claim-fence-rejected":
        reason, active_owner, active_epoch, _ = payload
        if (active_owner, active_epoch) != ((act[0], act[1]) if act else (None, None)):
            return []
        expected_reason = _fence_reason(inp, act, t)
        unknown_expiry = act is not None and act[3] is None and expected_reason is None
        if not (reason == expected_reason or (expected_reason == "fence-elsewhere"
                                               and reason in ("ledger-namespace-mismatch", "item-id-mismatch"))
                or (unknown_expiry and reason == "claim-expired")):
            return []
        return [(le, act, rev, t, _with_outcome(outs, (op_id, dg, False, envelope)))]
    # fresh success
    bound = _bind(le, act, rec)
    if bound is False or _fence_reason(inp, bound, t) is not None or rev not in (UNBOUND, expected_rev):
        return []
    if payload[0] != candidate:
        return []
    return [(le, bound, candidate, t, _with_outcome(outs, (op_id, dg, True, envelope)))]


def _publication_read(s: State, inp: tuple, out: tuple) -> list[State]:
    views = _resolved(s, inp[1])
    if views is not None:
        return [x for v in views for x in _publication_read(v, inp, out)]
    le, act, rev, floor, outs = s
    stored = _stored(outs, inp[1])
    if out[0] == "operation-not-found":
        return [s] if stored is None else []
    dg, succeeded, envelope = out[3]
    if stored is None or stored[1] != dg or stored[2] != succeeded:
        return []
    if stored[3] is None:
        return [(le, act, rev, floor, _with_outcome(outs, (stored[0], dg, succeeded, envelope)))]
    return [s] if stored[3] == envelope else []


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
    if t is not None and t < floor:
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
            f"outcomes={len(outs)}")


def _instant(ms) -> str:
    """Backend times as the contract writes them (ms since the epoch otherwise unreadable)."""
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
        describe_operation=lambda i, o: f"{i[0]}{i[1:]!r} -> {'?' if o is UNKNOWN else o[0]}",
        describe_state=_describe_state,
        name="work-claim-register",
    )


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


def check(history: list[dict], ctx: dict) -> dict:
    """Linearizability of a claim-chaos history, one register per (namespace, item).

    ``ctx`` may hold ``timeout`` (seconds, default 60), ``initial_durable``
    (the manifest-shaped initial durable state the runner seeded; ``durable``
    is accepted too) and
    ``initial_revisions`` (``{"ns/item": revision}``). Without them every tuple
    starts fresh with its ledger revision unbound (learnt from the replies).
    ``linearizable_budget`` (``Budget.from_mapping``) bounds each tuple's
    search; a tuple over it is ``unknown`` with the reason.
    """
    ops, _ = history_to_operations(history)
    starts = initial_states(ctx.get("initial_durable") or ctx.get("durable"))
    for name, rev in (ctx.get("initial_revisions") or {}).items():
        key = tuple(name.split("/", 1))
        le, act, _, floor, outs = starts.get(key, (0, None, UNBOUND, 0, ()))
        starts[key] = (le, act, rev, floor, outs)
    budget = Budget.from_mapping(ctx.get("linearizable_budget"))  # per (namespace, item)
    nd = claim_model()
    base = nd.to_model()
    fresh: State = (0, None, UNBOUND, 0, ())
    results = []
    verdict = OK
    for part in nd.partition(ops) if ops else []:
        key = part[0].metadata[2]
        start = starts.get(key, fresh)
        model = replace(base, init=lambda start=start: frozenset([start]), partition=None)
        res = check_operations(model, part, timeout=ctx.get("timeout", 60), budget=budget)
        results.append((key, part, res, model))
        if res.result == ILLEGAL:
            verdict = ILLEGAL
        elif res.result != OK and verdict == OK:
            verdict = "unknown"
    anomalies = [_anomaly(key, part, res) for key, part, res, model in results if res.result == ILLEGAL]
    unknown = [f"{k[0]}/{k[1]}: {reason}" for k, _, r, _ in results for reason in r.reasons]
    return {
        "valid": {OK: True, ILLEGAL: False}.get(verdict, "unknown"),
        "model": "work-claim-register",
        "op_count": len(ops),
        "partitions": [{"ledger_namespace": k[0], "item_id": k[1], "ops": len(p), "result": r.result,
                        "configurations": r.partitions[0].configurations if r.partitions else 0,
                        **({"reason": r.partitions[0].reason} if r.partitions and r.partitions[0].reason else {})}
                       for k, p, r, _ in results],
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
                        f"and real-time order: " + ex.text(lambda i: f"#{invoke[i]}") + "."),
        "ops": sorted({m for i in named for m in part[i].metadata[:2] if m is not None}),
        "data": {
            "ledger_namespace": key[0], "item_id": key[1],
            "longest_linearization": [invoke[i] for i in ex.prefix],
            "state_after_it": ex.state_text,
            "not_linearizable_after_it": [invoke[i] for i in ex.stuck],
            "first_to_return": None if ex.first_return is None else invoke[ex.first_return],
        },
    }
