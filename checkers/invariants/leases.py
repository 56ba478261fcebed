"""What the replies prove about each lease generation, per tuple and epoch.

Shared by ``dual_ownership``, ``epochs`` and ``stale_write``. For every
``(tuple, epoch)`` it gathers, from definite replies only (``ok``/``fail``):

* the identity ``(owner_id, issued_at)`` and every op that showed it;
* the latest point of backend time at which the lease was provably held
  (a decision reply with that epoch active at ``observed_at < expires_at``, or
  a successful renew / release of it). Reads are not decisions: their time is
  not persisted and may exceed later decision times, so they prove identity
  only;
* the expiry as last set (the observation with the greatest decision time);
* a successful release (the lease ended at its ``observed_at``);
* whether an *uncertain* renew or release of that epoch exists (``info`` or
  never completed): it may have shortened or ended the lease at a time no
  reply shows, so only provable points count for that epoch.

``held_interval`` turns this into a conservative ``[start, end)`` in ms: a
subset of when the lease was really held, so overlaps found with it are real.
"""

from __future__ import annotations

from ._common import BAD, History, Op, at


class Generation:
    __slots__ = ("owner", "issued", "issued_ms", "first_op", "live_ms", "live_op",
                 "exp_at_ms", "exp_ms", "exp_hi_ms", "exp_op", "release_ms", "release_op", "uncertain_end", "conflicts",
                 "set_expiries", "unset_shown", "acquired", "uncertain_renew")

    def __init__(self, owner: str, issued_ms: int | None, op: Op):
        self.owner = owner
        self.issued_ms = issued_ms
        self.issued = at(issued_ms) if issued_ms is not None else ""
        self.first_op = op
        self.live_ms: int | None = None
        self.live_op: Op | None = None
        self.exp_at_ms: int | None = None   # decision time of the latest expiry observation
        self.exp_ms: int | None = None      # the expiry it showed (the least, on a tie)
        self.exp_hi_ms: int | None = None   # the greatest expiry shown at that same decision time
        self.exp_op: Op | None = None
        self.release_ms: int | None = None
        self.release_op: Op | None = None
        self.uncertain_end = False
        self.conflicts: list[tuple[str, str, Op]] = []  # (owner, issued_at text, op) disagreeing with the first
        self.set_expiries: set[int] = set()  # expiries a successful acquire or renew of it set
        self.unset_shown: list[tuple[int, Op]] = []  # expiries shown before any decision was seen setting them
        self.acquired = False  # a successful acquire's own reply shows it (its first expiry is known)
        self.uncertain_renew = False  # a renew of unknown outcome may have set an expiry no reply shows

    def held_interval(self) -> tuple[int, int, Op] | None:
        """``(start_ms, end_ms_exclusive, op proving the end)``, or ``None``."""
        if self.issued_ms is None:
            return None
        end, end_op = None, None
        if self.live_ms is not None:
            # held *at* live_ms; another decision in the same millisecond may follow a
            # release, so the provable exclusive end is live_ms itself (never cry wolf)
            end, end_op = self.live_ms, self.live_op
        if self.release_ms is not None and (end is None or self.release_ms > end):
            end, end_op = self.release_ms, self.release_op
        if not self.uncertain_end and self.release_ms is None and self.exp_ms is not None:
            if end is None or self.exp_ms > end:
                end, end_op = self.exp_ms, self.exp_op
        if end is None or end <= self.issued_ms:
            return None
        return self.issued_ms, end, end_op  # type: ignore[return-value]


Leases = dict[tuple[str, str], dict[int, Generation]]


def _see(gens: dict[int, Generation], active: tuple | None, t_ms: int | None, op: Op, *, is_release: bool = False,
         sets_expiry: bool = True, decided: bool = False) -> None:
    if active is None or active is BAD:
        return
    owner, e, issued, x_ms = active
    if e is None or owner is None or issued is None:
        return
    g = gens.get(e)
    if g is None:
        g = gens[e] = Generation(owner, issued, op)
    elif g.owner == "" and g.issued_ms is None:  # placeholder left by an uncertain renew/release
        g.owner, g.issued_ms, g.issued, g.first_op = owner, issued, at(issued), op
    elif owner != g.owner or issued != g.issued_ms:
        g.conflicts.append((owner, at(issued), op))
        return
    if x_ms is not None:
        if decided:  # the claim a successful acquire / renew returned: it set this expiry
            g.set_expiries.add(x_ms)
            g.acquired = g.acquired or op.f == "acquire"
        elif x_ms not in g.set_expiries and len(g.unset_shown) < 64:
            g.unset_shown.append((x_ms, op))
    if t_ms is None:
        return
    if is_release:
        if g.release_ms is None or t_ms < g.release_ms:
            g.release_ms, g.release_op = t_ms, op
        return
    if x_ms is not None and t_ms < x_ms and (g.live_ms is None or t_ms > g.live_ms):
        g.live_ms, g.live_op = t_ms, op
    if sets_expiry and x_ms is not None:
        if g.exp_at_ms is None or t_ms > g.exp_at_ms:
            g.exp_at_ms, g.exp_ms, g.exp_hi_ms, g.exp_op = t_ms, x_ms, x_ms, op
        elif t_ms == g.exp_at_ms:
            # decisions in one millisecond have no visible order: keep both bounds, so
            # each checker can take the one that cannot cry wolf
            if x_ms < g.exp_ms:
                g.exp_ms, g.exp_op = x_ms, op
            g.exp_hi_ms = max(g.exp_hi_ms, x_ms)


_FS = frozenset(("acquire", "renew", "release", "read", "publish", "legacy-create", "legacy-transition"))


def build(h: History) -> Leases:
    """Per tuple, per epoch: the ``Generation`` evidence (cached on the history)."""
    got = h.derived.get("leases")
    if got is not None:
        return got
    leases: Leases = {}
    for op in h.ops:
        f = op.f
        if f not in _FS:
            continue
        key = op.key
        if key is None:
            continue
        if op.uncertain:
            if f in ("renew", "release") and op.epoch is not None:
                gens = leases.setdefault(key, {})
                g = gens.get(op.epoch)
                if g is None:
                    # remember it even before any reply shows the epoch
                    g = gens[op.epoch] = Generation("", None, op)
                g.uncertain_end = True
                g.uncertain_renew = g.uncertain_renew or f == "renew"
            continue
        if op.exit is None:
            continue
        gens = leases.setdefault(key, {})
        t_ms = op.t if op.le is not None else None
        if op.type == "ok" and f == "release":
            _see(gens, op.claim, t_ms, op, is_release=True)
        if op.type == "ok" and (f == "acquire" or f == "renew"):
            _see(gens, op.claim, t_ms, op, decided=True)
        if op.le is not None and op.active is not None:
            # A read does not persist its time (vectors.md §5.1 rule 3): after a backward
            # clock step later decisions may carry *earlier* times, so a read's time is
            # not on the decision timeline - it proves identity only. A replayed publish
            # carries an old claim_read_back: a point, not the latest expiry.
            _see(gens, op.active, None if f == "read" else t_ms, op, sets_expiry=f != "publish")
    h.derived["leases"] = leases
    return leases


def likeliest_refusal(candidates: list[Op]) -> Op:
    """Of refused decisions that could have made a change no successful one made, the one to name: an
    exit-6 refusal (the store may have written before it failed: "could not be persisted") before a
    decision that writes nothing (``claim-held``), and of those the last invoked."""
    return max(candidates, key=lambda op: (op.exit == 6, op.indices[0]))


def refused_renew_behind(h: History, key: tuple, e: int, g: Generation, shown: Op) -> Op | None:
    """The renew of generation ``e`` (by its owner) refused with ``state: unchanged`` and invoked before
    ``shown``, the reply that shows an expiry no successful acquire or renew of it set: the one decision
    that could have set it (Wowbagger's F5 on renew: the journal fsync failed after the line was
    written). None where another decision may have (a renew of unknown outcome; a generation only an
    acquire of unknown outcome shows, whose own lease is not known here)."""
    if g.uncertain_renew or not g.acquired:
        return None
    refused = h.derived.get("refused-renews")
    if refused is None:
        refused = h.derived["refused-renews"] = {}
        for op in h.ops:
            if op.f == "renew" and op.type == "fail" and op.definite and op.key is not None and op.epoch is not None:
                refused.setdefault((op.key, op.owner, op.epoch), []).append(op)
    before = [op for op in refused.get((key, g.owner, e), ()) if op.indices[0] < shown.indices[-1]]
    return likeliest_refusal(before) if before else None
