"""Decisions: each refusal and each acceptance agrees with the state the reply
itself shows and with its own request (contract §4-§7).

A claim refusal carries the exact read-back it was decided on (§5: "Semantic
failures ... include the exact normalized read-back in error.details"), a
publication refusal its fence details or revisions (§6), a legacy decision
its read-back (§7). So most of the precedence rules can be judged one reply
at a time, exactly, without guessing an order:

* ``false-claim-held``: ``claim-held`` although the read-back shows no
  unexpired active claim, or a record unequal to the witness (an unequal
  witness is ``claim-conflict``: step 1 comes first) (§4, §5 Acquire 1-2);
* ``false-claim-conflict``: ``claim-conflict`` although the read-back equals
  the acquire's witness, or shows the renew/release CAS tuple exactly (§5);
* ``false-claim-expired``: ``claim-expired`` although the read-back shows the
  CAS tuple unexpired at the decision time, or does not show the tuple (§4, §5 Renew);
* ``renew-after-expiry``: a renew/release accepted at or after the expiry it
  names (equality is expired) (§4, §5 Renew);
* ``stale-expiry-accepted``: a renew/release accepted with an expected expiry
  that an earlier renew of the same generation had provably replaced (a
  judgement across replies, in real-time order), or two renews / releases
  that each changed one CAS tuple both accepted with it, however they
  overlapped (a check-then-act decision) (§5 Renew, Release);
* ``false-epoch-exhausted``: ``epoch-exhausted`` below the maximum, or before
  the witness and held checks that precede it (§4, §5 Acquire 3);
* ``false-fence-rejection``: fence details that are not the request's fence,
  or a reason the shown active claim contradicts (§6 step 7);
* ``false-revision-conflict``: a returned or stored ``ledger-revision-conflict``
  whose details do not match the request (expected) or differ from nothing
  (actual equal to expected), or whose request expected the very revision
  the item provably had at the decision (§6 step 8);
* ``legacy-write-over-active-claim``, ``legacy-create-over-claim-history`` and
  ``false-legacy-refusal`` (§7).
"""

from __future__ import annotations

import bisect

from backends.contract.values import EPOCH_MAX

from ._common import BAD, Findings, History, Op, active_text, at, fmt_tuple, initial_revisions, prepare
from .floors import fresh_publishes
from .stale_write import revealed_outcomes


def check(history, ctx: dict | None = None) -> dict:
    h = prepare(history)
    out = Findings()
    judged = 0
    for op in h.ops:
        if not op.definite:
            continue
        f = op.f
        if f == "acquire" or f == "renew" or f == "release":
            judged += _claim(out, op)
        elif f == "publish":
            judged += _publish(out, op)
        elif f == "legacy-create" or f == "legacy-transition":
            judged += _legacy(out, op)
    judged += _stale_expiries_accepted(out, h)
    judged += _one_tuple_accepted_twice(out, h)
    judged += _stored_conflicts(out, h)
    judged += _conflicts_against_known_revision(out, h, initial_revisions(ctx or {}) or {})
    return out.result({"decisions_judged": judged})


def _shown(op: Op) -> tuple | None:
    """The record a reply shows, if well formed: ``(last_epoch, active)``."""
    if op.le is None or op.le < 0 or op.t is None or op.active is BAD:
        return None
    if op.active is not None and None in op.active:
        return None
    return op.le, op.active


def _cas_tuple(op: Op) -> str:
    return f"owner {op.owner!r} epoch {op.epoch} expiring {at(op.exp_expires)}"


def _claim(out: Findings, op: Op) -> int:
    rec = _shown(op)
    code = op.code if op.type == "fail" else "ok"
    if rec is None or op.key is None:
        return 0
    le, act = rec
    t, key = op.t, op.key
    where = f"Tuple {fmt_tuple(key)}: {op.f} by {op.owner!r}"
    if op.f == "acquire":
        if op.w_le is None or op.w_active is BAD or (op.w_active is not None and None in op.w_active):
            return 0
        equal = (op.w_le, op.w_active) == (le, act)
        live = act is not None and t < act[3]
        if code == "claim-held" and not (equal and live):
            why = (f"the witness (last_epoch {op.w_le}, {active_text(op.w_active)}) is not the record it shows "
                   f"(last_epoch {le}, {active_text(act)}), which is claim-conflict: step 1 comes first"
                   if not equal else f"it shows {active_text(act)}, which is not unexpired at {at(t)}")
            out.add("false-claim-held",
                    f"{where} was refused with claim-held at {at(t)}, but {why}. claim-held is the answer only "
                    "to an equal witness with an unexpired active claim (contract §4, §5 Acquire steps 1-2).",
                    op.indices, tuple=list(key), decided_at=at(t), shown=active_text(act))
        elif code == "claim-conflict" and equal:
            out.add("false-claim-conflict",
                    f"{where} was refused with claim-conflict at {at(t)}, but the record it shows (last_epoch "
                    f"{le}, {active_text(act)}) equals its CAS witness. claim-conflict is the answer only to an "
                    "unequal witness (contract §5 Acquire, step 1).",
                    op.indices, tuple=list(key), decided_at=at(t), witness_last_epoch=str(op.w_le))
        elif code == "epoch-exhausted" and (le < EPOCH_MAX or not equal or live):
            why = (f"last_epoch is {le}, below the maximum" if le < EPOCH_MAX else
                   "the witness is not the record it shows (claim-conflict comes first)" if not equal else
                   f"the record shows {active_text(act)} unexpired (claim-held comes first)")
            out.add("false-epoch-exhausted",
                    f"{where} was refused with epoch-exhausted at {at(t)}, but {why} (contract §4, §5 Acquire "
                    "steps 1-3).", op.indices, tuple=list(key), last_epoch=str(le))
        return 1
    if op.epoch is None or op.exp_expires is None:
        return 0
    matches = act is not None and (act[0], act[1], act[3]) == (op.owner, op.epoch, op.exp_expires)
    if code == "claim-conflict" and matches:
        out.add("false-claim-conflict",
                f"{where} was refused with claim-conflict at {at(t)}, but the active claim it shows is exactly "
                f"its CAS tuple ({_cas_tuple(op)}). Owner, epoch and expected expiry are one CAS tuple; only a "
                f"mismatch is claim-conflict (contract §5 Renew, Release).",
                op.indices, tuple=list(key), decided_at=at(t))
    elif code == "claim-expired" and not (matches and t >= op.exp_expires):
        why = (f"it shows {active_text(act)}, not its CAS tuple ({_cas_tuple(op)}): that is claim-conflict"
               if not matches else f"the claim expires at {at(op.exp_expires)}, after the decision")
        out.add("false-claim-expired",
                f"{where} was refused with claim-expired at {at(t)}, but {why}. claim-expired is the answer to "
                "an exactly matching tuple whose lease has run out: active exactly while effective_now < "
                "expires_at (contract §4, §5 Renew).", op.indices, tuple=list(key), decided_at=at(t))
    elif code == "ok" and t >= op.exp_expires:
        out.add("renew-after-expiry",
                f"{where} was accepted at {at(t)} for the claim expiring at {at(op.exp_expires)}: at or after its "
                "expiry. An exactly matching but expired tuple is claim-expired; equality is expired "
                "(contract §4, §5 Renew).", op.indices, tuple=list(key), decided_at=at(t),
                expected_expires_at=at(op.exp_expires))
    return 1


def _stale_expiries_accepted(out: Findings, h: History) -> int:
    """A renew or release R accepted with (owner, epoch, X) although a renew S
    of that generation, with the same expected expiry X, had completed before
    R was invoked and moved the expiry to Y != X. Only a renew of that epoch
    sets its expiry (an acquire allocates a new epoch, a release clears it),
    so R is provably wrong unless some renew of the epoch that could have taken
    effect between S and R may have set X again: one whose outcome is unknown,
    or one that shows X. Where one may, it says nothing."""
    lanes: dict[tuple, list[Op]] = {}
    for op in h.ops:
        if op.f == "renew" and op.key is not None and op.epoch is not None:
            lanes.setdefault((op.key, op.epoch), []).append(op)
    n = 0
    for r in h.ops:
        if ((r.f != "renew" and r.f != "release") or r.type != "ok" or not r.definite or r.key is None
                or r.epoch is None or r.exp_expires is None):
            continue
        lane = lanes.get((r.key, r.epoch), ())
        x = r.exp_expires
        for s in lane:
            y = _shown_expiry(s)
            if (s is r or s.type != "ok" or not s.definite or s.owner != r.owner or s.exp_expires != x
                    or y is None or y == x or not s.precedes(r)):
                continue
            between = [q for q in lane if q is not s and q is not r and q.ip < r.cp
                       and (q.cp is None or q.cp > s.ip)]
            if any(not (q.definite and (q.type == "fail" or _shown_expiry(q) not in (None, x))) for q in between):
                continue
            n += 1
            out.add("stale-expiry-accepted",
                    f"Tuple {fmt_tuple(r.key)}: {r.f} by {r.owner!r} was accepted at {at(r.t)} for "
                    f"{_cas_tuple(r)}, but renew {s.i} of the same generation, with the same expected expiry, had "
                    f"already moved it to {at(y)} before this {r.f} began, and no renew of that epoch could have "
                    "set it back. Owner, epoch and expected expiry are one CAS tuple; a stale expiry is "
                    "claim-conflict (contract §5 Renew, Release).",
                    [*s.indices, *r.indices], tuple=list(r.key), epoch=str(r.epoch),
                    expected_expires_at=at(x), expires_at=at(y))
            break
    return n


def _one_tuple_accepted_twice(out: Findings, h: History) -> int:
    """Two renews / releases R1, R2 accepted with one CAS tuple (owner, epoch,
    X), each of which changed it (a release clears the claim, a renew whose
    reply shows an expiry Y != X moves it): in either order the second found
    the tuple gone, so one of them had to be claim-conflict, however the two
    overlapped. The later-decided one is reported. Only a renew of that epoch
    could set X again in between; where one that was not over before both
    began may have (its outcome unknown, or its reply showing X), nothing is
    said."""
    groups: dict[tuple, list[Op]] = {}
    lanes: dict[tuple, list[Op]] = {}
    for op in h.ops:
        if op.f == "renew" and op.key is not None and op.epoch is not None:
            lanes.setdefault((op.key, op.epoch), []).append(op)
        if ((op.f == "renew" or op.f == "release") and op.type == "ok" and op.definite and op.key is not None
                and op.epoch is not None and op.exp_expires is not None and op.t is not None):
            groups.setdefault((op.key, op.owner, op.epoch, op.exp_expires), []).append(op)
    n = 0
    for (key, _owner, epoch, x), ops in groups.items():
        changed = [op for op in ops if op.f == "release" or _shown_expiry(op) not in (None, x)]
        if len(changed) < 2:
            continue
        changed.sort(key=lambda op: (op.t, op.i))
        first, second = changed[0], changed[1]
        lo, hi = min(first.ip, second.ip), max(first.cp, second.cp)
        # a renew that may have taken effect between the two (not over before both began) and set X
        if any(q is not first and q is not second and q.ip < hi and (q.cp is None or q.cp > lo)
               and (not q.definite or _shown_expiry(q) == x) for q in lanes.get((key, epoch), ())):
            continue
        n += 1
        what = "cleared it" if first.f == "release" else f"moved its expiry to {at(_shown_expiry(first))}"
        out.add("stale-expiry-accepted",
                f"Tuple {fmt_tuple(key)}: {second.f} by {second.owner!r} was accepted at {at(second.t)} for "
                f"{_cas_tuple(second)}, but {first.f} {first.i}, accepted for the very same CAS tuple at "
                f"{at(first.t)}, {what}; in either order the second of the two found the tuple changed. "
                "Owner, epoch and expected expiry are one CAS tuple, compared and written in one serialized "
                "decision; a changed tuple is claim-conflict (contract §5 Renew, Release).",
                [*first.indices, *second.indices], tuple=list(key), epoch=str(epoch), expected_expires_at=at(x))
    return n


def _shown_expiry(op: Op) -> int | None:
    """The expiry a renew's reply shows for its own generation, if any."""
    rec = _shown(op)
    if rec is None or rec[1] is None or rec[1][1] != op.epoch:
        return None
    return rec[1][3]


_FENCE_REASONS = ("ledger-namespace-mismatch", "item-id-mismatch", "no-active-claim", "owner-mismatch",
                  "epoch-mismatch", "claim-expired")


def _publish(out: Findings, op: Op) -> int:
    if op.code == "claim-fence-rejected":
        return _fence(out, op)
    if op.code == "ledger-revision-conflict":
        expected, actual = op.conflict_revisions
        _conflict_details(out, op, expected, actual, [op.i, op.c], "returned")
        return 1
    return 0


def _fence(out: Findings, op: Op) -> int:
    reason, s_owner, s_epoch, a_owner, a_epoch = op.fence_details
    if op.key is None or op.owner is None or op.epoch is None:
        return 0
    static = None
    if op.fence_key is not None and op.fence_key[0] != op.key[0]:
        static = "ledger-namespace-mismatch"
    elif op.fence_key is not None and op.fence_key[1] != op.key[1]:
        static = "item-id-mismatch"
    problems = []
    if (s_owner, s_epoch) != (op.owner, op.epoch):
        problems.append(f"the details name the supplied fence as {s_owner!r} epoch {s_epoch}, not the request's "
                        f"{op.owner!r} epoch {op.epoch}")
    if static is not None:
        if reason != static:
            problems.append(f"the fence names another {'namespace' if static[7] == 'n' else 'item'}, which is "
                            f"{static}, checked first")
    elif reason == "no-active-claim":
        if a_owner is not None:
            problems.append(f"it shows an active claim of {a_owner!r} epoch {a_epoch}")
    elif reason == "owner-mismatch":
        if a_owner is None or a_owner == op.owner:
            problems.append("the active owner it shows is " + ("none" if a_owner is None else "the fence's own"))
    elif reason == "epoch-mismatch":
        if a_owner != op.owner or a_epoch == op.epoch:
            problems.append(f"it shows owner {a_owner!r} epoch {a_epoch}: "
                            + ("not an epoch mismatch" if a_owner == op.owner else "an owner mismatch comes first"))
    elif reason == "claim-expired":
        if (a_owner, a_epoch) != (op.owner, op.epoch):
            problems.append(f"it shows owner {a_owner!r} epoch {a_epoch}, not the fence's generation")
    elif reason in ("ledger-namespace-mismatch", "item-id-mismatch"):
        problems.append("the fence names the request's own tuple")
    else:
        problems.append(f"{reason!r} is not a fence reason")
    if problems:
        out.add("false-fence-rejection",
                f"Tuple {fmt_tuple(op.key)}: publish {op.oid} was refused with claim-fence-rejected "
                f"({reason}), but " + "; ".join(problems) + ". The reason is the first failing fence dimension "
                "of the request's fence against the active claim at the decision, in the order "
                + ", ".join(_FENCE_REASONS) + " (contract §6 step 7).",
                op.indices, tuple=list(op.key), operation_id=op.oid, reason=reason, problems=problems)
    return 1


def _conflict_details(out: Findings, op: Op, expected, actual, ops: list, how: str) -> None:
    problems = []
    if expected != op.exp_rev:
        problems.append(f"its expected_revision is {expected}, not the request's {op.exp_rev}")
    if actual is not None and actual == op.exp_rev:
        problems.append(f"its actual_revision {actual} is the request's own expected revision: nothing conflicts")
    if actual is not None and actual == op.cand and expected != op.exp_rev:
        problems.append("its actual_revision is the request's candidate")
    if problems:
        out.add("false-revision-conflict",
                f"Tuple {fmt_tuple(op.key)}: publish {op.oid} {how} ledger-revision-conflict, but "
                + "; ".join(problems) + ". A revision conflict reports the request's expected_revision and the "
                "durable revision at the decision, which differ (contract §6 step 8).",
                ops, tuple=list(op.key or ()), operation_id=op.oid, expected_revision=expected,
                actual_revision=actual, request_expected_revision=op.exp_rev)


def _stored_conflicts(out: Findings, h: History) -> int:
    """Revision conflicts stored by a publish whose own reply was lost, as a
    publication-read or the final state shows them (a conflict some attempt
    got as a reply is judged with that reply)."""
    revealed = revealed_outcomes(h)
    answered = {op.oid for op in h.ops if op.f == "publish" and op.definite and op.code == "ledger-revision-conflict"}
    n = 0
    for op in h.ops:
        if op.f != "publish" or op.oid is None or op.oid in answered:
            continue
        spec, proof, digest = revealed.get(op.oid, (None, None, None))
        if spec is None or spec[0] != "ledger-revision-conflict" or digest != op.digest:
            continue
        answered.add(op.oid)
        n += 1
        _conflict_details(out, op, spec[1], spec[2],
                          [*op.indices, *(proof.indices if proof is not None else [h.final_index])],
                          "stored (as a later read shows)")
    return n


def _writes(h: History) -> dict[tuple, list[tuple[int, float, str, Op]]]:
    """Per tuple, every publication that wrote or may have written the item:
    ``(from, until, candidate, op)`` (history positions). A first attempt answered ok before
    any retry wrote inside its own call; otherwise a write may have happened
    at any time after the first attempt that could commit (to the end)."""
    fresh = fresh_publishes(h)
    by_oid: dict[str, list[Op]] = {}
    for op in h.ops:
        if op.f == "publish" and op.oid is not None and op.key is not None:
            by_oid.setdefault(op.oid, []).append(op)
    out: dict[tuple, list[tuple[int, float, str, Op]]] = {}
    for ops in by_oid.values():
        first = ops[0]
        if first.ip in fresh and first.type == "ok":
            out.setdefault(first.key, []).append((first.ip, first.cp, first.cand, first))
            continue
        could = [op for op in ops if op.type == "ok" or op.uncertain]
        for op in could:
            out.setdefault(op.key, []).append((min(o.ip for o in could), float("inf"), op.cand, op))
    return out


def _conflicts_against_known_revision(out: Findings, h: History, seeds: dict) -> int:
    """A fresh revision conflict decided while the item provably had the very
    revision the request expected: the last write completed before the
    conflicting publish was invoked wrote it (or there was none: the seed),
    no earlier write may have come after that one, and no write could have
    happened while the publish ran. Where writes overlap, it says nothing."""
    fresh = fresh_publishes(h)
    legacy = {op.key for op in h.ops if op.f in ("legacy-create", "legacy-transition") and op.type != "fail"}
    lanes: dict = {}
    for key, ws in _writes(h).items():
        ws.sort(key=lambda w: w[0])
        peak, top = [], -1.0
        for w in ws:
            top = max(top, w[1])
            peak.append(top)  # the latest end among the writes started so far
        lanes[key] = ([w[0] for w in ws], peak, ws)
    n = 0
    for c in h.ops:
        if c.f != "publish" or c.code != "ledger-revision-conflict" or c.ip not in fresh or c.key in legacy:
            continue
        starts, peak, ws = lanes.get(c.key, ([], [], []))
        j = bisect.bisect_right(starts, c.cp)  # writes started before the conflict completed
        if j and peak[j - 1] >= c.ip:
            continue  # a write may have happened while it ran
        if j:
            last = ws[j - 1]
            if (j > 1 and peak[j - 2] >= last[0]) or last[2] != c.exp_rev:
                continue  # the latest writes overlap, or the last one wrote something else
            why, proof = f"the last publication before it ({last[3].oid}) wrote exactly that", last[3].indices
        elif seeds.get(c.key) == c.exp_rev:
            why, proof = "it is the seeded revision and nothing was published before", []
        else:
            continue
        n += 1
        _expected, actual = c.conflict_revisions
        out.add("false-revision-conflict",
                f"Tuple {fmt_tuple(c.key)}: publish {c.oid} was refused with ledger-revision-conflict (actual "
                f"{actual}), but the durable revision was provably its expected {c.exp_rev}: {why}, and no write "
                "could have happened while it ran. A revision conflict needs the durable revision to differ "
                "from expected_revision at the decision (contract §6 step 8).",
                [*proof, *c.indices], tuple=list(c.key),
                operation_id=c.oid, expected_revision=c.exp_rev, actual_revision=actual)
    return n


def _legacy(out: Findings, op: Op) -> int:
    rec = _shown(op)
    if rec is None or op.key is None:
        return 0
    le, act = rec
    t = op.t
    live = act is not None and t < act[3]
    where = f"Tuple {fmt_tuple(op.key)}: {op.f}"
    if op.type == "ok":
        if op.f == "legacy-transition" and live:
            out.add("legacy-write-over-active-claim",
                    f"{where} was permitted at {at(t)} although it shows {active_text(act)}, unexpired. Legacy "
                    "transition must refuse an active claimed item with active-claim-write-refused (contract §7).",
                    op.indices, tuple=list(op.key), decided_at=at(t))
        if op.f == "legacy-create" and le != 0:
            out.add("legacy-create-over-claim-history",
                    f"{where} was permitted at {at(t)} although the tuple has claim history (last_epoch {le}). "
                    "Legacy create must refuse it with claimed-item-write-refused, or recreation would bypass "
                    "the epoch high-water mark (contract §7).", op.indices, tuple=list(op.key), last_epoch=str(le))
    elif op.code == "active-claim-write-refused" and not live:
        out.add("false-legacy-refusal",
                f"{where} was refused with active-claim-write-refused at {at(t)}, but it shows "
                f"{active_text(act)}, not an unexpired active claim (contract §4, §7).",
                op.indices, tuple=list(op.key), decided_at=at(t))
    elif op.code == "claimed-item-write-refused" and le == 0:
        out.add("false-legacy-refusal",
                f"{where} was refused with claimed-item-write-refused at {at(t)}, but it shows no claim history "
                "(last_epoch 0) (contract §7).", op.indices, tuple=list(op.key), decided_at=at(t))
    return 1
