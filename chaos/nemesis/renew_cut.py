"""``partition_after: renew``: the partitioned lease holder, every time.

One armed cut (``RenewCut``) waits on every worker slot; the first slot that
sends a renew claims it (``Slot.on_renew``, called before the renew goes out)
and its route is cut right after that renew's COMMIT: the server extended the
lease, the holder has not heard. The heal waits for evidence, not for a drawn
time: a rival's ok acquire of the holder's tuple under a higher epoch (the
lease expired while its holder was cut off), or ``hold_ms`` from the cut at
most. So the holder hears of its renew only after a rival took its item over,
and its next step is a publish under the old fence.

What the mode is for is that next step, so it is the evidence
(``settle``): the cut took effect once the holder's renew came back ok after
the takeover and the holder completed a publish under the renewed fence. Until each healed cut is
settled the package is ``waiting`` and the workload goes on past its time
limit (``chaos.runner.UntilProven``): a run never ends between the late renew
reply and the publish it leads to. A cut no worker claimed, or one healed
without a rival, never counts: a run of only those is ``unknown``.
"""

from __future__ import annotations

import threading
import time

#: how long the cut waits for some worker to send a renew, and for that renew's
#: COMMIT to go through (both bounded by the nemesis step's own limit)
RENEW_WAIT_S = 3.0
COMMIT_WAIT_S = 1.0


class RenewCut:
    """One armed cut; the first slot that sends a renew claims it."""

    def __init__(self, env):
        self.env = env
        self.lock = threading.Lock()
        self.claimed = threading.Event()
        self.slot: int | None = None
        self.request: dict | None = None
        self.process = None
        self.since = 0            # history length when the renew was claimed: its completion comes later
        self.healed = False       # wait_and_heal() ran: a rival, or not, is known
        self.followup: bool | None = None   # settle(): True acted on, False never will, None not yet
        for slot in env.slots:
            slot.on_renew = self.claim

    def claim(self, t: int, op: dict) -> None:
        with self.lock:
            if self.slot is not None:
                return
            self.slot, self.request, self.process = t, dict(op["value"]), op["process"]
            self.since = len(self.env.history.snapshot())
            self.disarm()
            self.env.routes.cut(t, "blackhole", "commit")   # before the renew is sent: its COMMIT is next
        self.claimed.set()

    def disarm(self) -> None:
        for slot in self.env.slots:
            if slot.on_renew == self.claim:
                slot.on_renew = None

    def rival(self, since_s: float, workers: int) -> dict | None:
        """A rival's ok acquire of the holder's tuple under a higher epoch,
        completed after the cut engaged (monotonic ``since_s``)."""
        req = self.request
        since_ns = since_s * 1e9 - self.env.t0
        for op in reversed(self.env.history.snapshot()):
            if op.get("time", 0) < since_ns:
                return None
            if op.get("f") != "acquire" or op.get("type") != "ok" or not isinstance(op.get("process"), int):
                continue
            result = ((op.get("value") or {}).get("envelope") or {}).get("result") or {}
            rb, claim = result.get("read_back") or {}, result.get("claim") or {}
            if ((rb.get("ledger_namespace"), rb.get("item_id")) == (req["ledger_namespace"], req["item_id"])
                    and op["process"] % workers != self.slot and int(claim.get("epoch", 0)) > int(req["epoch"])):
                return {"process": op["process"], "epoch": claim["epoch"], "index": op.get("index")}
        return None

    def wait_and_heal(self, hold_s: float, workers: int) -> dict:
        """Wait (bounded) for the renew, its COMMIT and a rival's takeover; heal."""
        out = {"at": "renew", "holder": None, "renew": None, "rival": None, "held_ms": 0}
        if not self.claimed.wait(RENEW_WAIT_S):
            with self.lock:
                if self.slot is None:   # nobody renewed: nothing was cut
                    self.disarm()
                    self.healed, self.followup = True, False
                    return dict(out, healed=[], took_effect=False, note="no worker sent a renew in time")
        t = self.slot
        proxy = self.env.routes.proxies[t]
        limit = time.monotonic() + COMMIT_WAIT_S
        while proxy.blackholed_at is None and time.monotonic() < limit:
            time.sleep(0.005)
        engaged = proxy.blackholed_at
        rival = None
        if engaged is not None:
            while rival is None and time.monotonic() < engaged + hold_s:
                time.sleep(0.01)
                rival = self.rival(engaged, workers)
        self.env.routes.heal(t)
        with self.lock:
            self.healed = True
            if rival is None:
                self.followup = False   # nobody took the item over: not what this cut is for
        held = round((time.monotonic() - engaged) * 1000) if engaged else 0
        return dict(out, healed=[t], holder=self.process, held_ms=held, rival=rival,
                    renew={k: self.request.get(k) for k in ("ledger_namespace", "item_id", "owner_id", "epoch")},
                    took_effect=engaged is not None and proxy.held > 0)

    def settle(self) -> bool | None:
        """Whether the holder heard of its renew (ok) and then completed a
        publish under the renewed fence; counted once in the coverage when it
        did. An op of another kind first (its next cycle) settles it False."""
        with self.lock:
            if self.followup is not None or not self.healed:
                return self.followup
            fence = {"owner_id": self.request["owner_id"], "epoch": self.request["epoch"]}
            renewed, asked = False, {}
            for op in self.env.history.snapshot()[self.since:]:
                if op.get("process") != self.process:
                    continue
                if op["type"] == "invoke":
                    asked = op.get("value") or {}
                elif not renewed:
                    if op.get("f") == "renew":
                        if op["type"] != "ok":
                            self.followup = False
                            break
                        renewed = True
                elif op.get("f") == "publish" and {k: str((asked.get("claim_fence") or {}).get(k))
                                                   for k in fence} == {k: str(v) for k, v in fence.items()}:
                    self.followup = True
                    self.env.coverage.took_effect("partition")
                    break
                elif op.get("f") not in ("publish", "publication-read"):   # a stale-fence try may come first
                    self.followup = False
                    break
            return self.followup


def waiting(env) -> bool:
    """An armed or healing cut, or a healed one whose holder has yet to act."""
    cuts = env.partition_base.get("renew-cuts", [])
    return any(c.settle() is None for c in cuts)


def final(env) -> None:
    for cut in env.partition_base.get("renew-cuts", []):
        cut.disarm()
        cut.settle()
