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

from ._common import Op, Prepared, epoch_int, instant_ms, obj, read_back_of


class Generation:
    __slots__ = ("owner", "issued", "issued_ms", "first_op", "live_ms", "live_op",
                 "exp_at_ms", "exp_ms", "exp_hi_ms", "exp_op", "release_ms", "release_op", "uncertain_end", "conflicts")

    def __init__(self, owner: str, issued: str, op: Op):
        self.owner = owner
        self.issued = issued
        self.issued_ms = instant_ms(issued)
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
        self.conflicts: list[tuple[str, str, Op]] = []  # (owner, issued_at, op) disagreeing with the first

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

_cache: list = [None, None]


def _see(gens: dict[int, Generation], active: dict, t_ms: int | None, op: Op, *, is_release: bool = False,
         sets_expiry: bool = True) -> None:
    e = epoch_int(active.get("epoch"))
    owner, issued, expires = active.get("owner_id"), active.get("issued_at"), active.get("expires_at")
    if e is None or not isinstance(owner, str) or not isinstance(issued, str):
        return
    g = gens.get(e)
    if g is None:
        g = gens[e] = Generation(owner, issued, op)
    elif g.owner == "" and g.issued == "":  # placeholder left by an uncertain renew/release
        g.owner, g.issued, g.issued_ms, g.first_op = owner, issued, instant_ms(issued), op
    elif owner != g.owner or issued != g.issued:
        g.conflicts.append((owner, issued, op))
        return
    x_ms = instant_ms(expires)
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


def build(prep: Prepared) -> Leases:
    """Per tuple, per epoch: the ``Generation`` evidence (cached per history)."""
    if _cache[0] is prep:
        return _cache[1]
    leases: Leases = {}
    for op in prep.ops:
        f = op.f
        if f not in ("acquire", "renew", "release", "read", "publish", "legacy-create", "legacy-transition"):
            continue
        key = op.tuple()
        if key is None:
            continue
        if op.uncertain:
            if f in ("renew", "release"):
                e = epoch_int(op.req.get("epoch"))
                if e is not None:
                    gens = leases.setdefault(key, {})
                    g = gens.get(e)
                    if g is None:
                        # remember it even before any reply shows the epoch
                        g = gens[e] = Generation("", "", op)
                        g.issued_ms = None
                    g.uncertain_end = True
            continue
        if op.env is None:
            continue
        gens = leases.setdefault(key, {})
        rb = read_back_of(op)
        t_ms = instant_ms(rb.get("observed_at")) if rb else None
        r = op.result()
        if op.type == "ok" and f == "release" and isinstance(r.get("released_claim"), dict):
            _see(gens, r["released_claim"], t_ms, op, is_release=True)
        if op.type == "ok" and f in ("acquire", "renew") and isinstance(r.get("claim"), dict):
            _see(gens, r["claim"], t_ms, op)
        if rb is not None and isinstance(rb.get("active"), dict):
            # A read does not persist its time (vectors.md §5.1 rule 3): after a backward
            # clock step later decisions may carry *earlier* times, so a read's time is
            # not on the decision timeline - it proves identity only. A replayed publish
            # carries an old claim_read_back: a point, not the latest expiry.
            _see(gens, rb["active"], None if f == "read" else t_ms, op, sets_expiry=f != "publish")
    _cache[0], _cache[1] = prep, leases
    return leases


def claim_identity(value: object) -> tuple[str, str] | None:
    a = obj(value)
    if isinstance(a.get("owner_id"), str) and isinstance(a.get("issued_at"), str):
        return a["owner_id"], a["issued_at"]
    return None
