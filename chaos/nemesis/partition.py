"""``partition``: a worker, or a group of workers, loses the server while the
server and the other workers go on (``--backend postgres``).

Every worker reaches the server through its own ``FaultProxy`` on 127.0.0.1
(``Routes``: worker slot -> proxy -> the server, or the lost-reply proxy when
that nemesis runs too), so one worker's network can fail alone. A partition
op cuts the drawn slots' routes, the ``partition-heal`` op after a drawn
duration (1.6-2.3 s: longer than a 1.5 s lease, so a rival can take the items
of a cut-off holder) restores them. Two modes:

* ``blackhole``: the proxy holds every byte both ways (no RST: traffic stalls,
  as behind a dropped link; TCP would retransmit, so the held bytes are
  delivered at the heal if the client still waits). The link fails in the
  middle of a conversation: ``after`` ``commit`` (the default) forwards the
  worker's requests up to its next COMMIT and holds everything after it (the
  decision is made and its locks released, the worker hears of it only after
  the heal); ``after`` k (``partition_after: requests``, k drawn 1-6) holds
  after the next k requests, so the cut can fall anywhere in a transaction,
  also while it holds the namespace row lock (the other workers of that
  namespace then wait for the heal, as PostgreSQL makes them). The hold lasts
  ``hold_ms`` (drawn 1.6-2.3 s) from that moment: the heal waits for it, at
  most 2.5 s more. A
  worker's deadline (``deadline_s``) cuts a stalled transaction; a shorter
  stall lets it finish late.
  ``after`` ``renew`` (``partition_after: renew``): the classic partitioned
  lease holder, made to happen every time rather than by luck. The cut is
  armed on every slot; the first worker that sends a renew is the one cut off,
  right after that renew's COMMIT (the server extended its lease, the holder
  has not heard). The heal then waits for evidence, not for a drawn time: a
  rival's ok acquire of the holder's tuple under a higher epoch (its lease
  expired while it was cut off), or ``hold_ms`` from the cut at most. So the
  holder hears of its renew only after a rival took its item over, and its
  next step is a publish under the old fence (``chaos.nemesis.renew_cut``:
  such a cut counts once that publish completed; the workload waits for it).
* ``refuse``: the proxy stops listening (a connect gets ECONNREFUSED) and
  resets every open connection; listening again at the heal.

Evidence, at the heal (``took_effect``): a cut route held traffic
(``held_chunks``) or a cut worker's op ended ``info`` during the window
(``indeterminate_ops``). The cut-off lease holders and their rivals are in the
history: the partition op names the slots, their ops stall or fail, the other
slots' acquires go on (see ``cut_off_holders`` in the tests).

Traffic stays on loopback; nothing of the host's network is touched.
"""

from __future__ import annotations

import time

from psycopg.conninfo import make_conninfo

from chaos.faults.pgwire import FrontendScanner
from chaos.faults.proxy import FaultProxy
from chaos.nemesis import renew_cut
from chaos.nemesis.base import FaultCycle, Package, draw_targets

MODES = ("blackhole", "refuse")
#: a COMMIT statement as it crosses the wire (Parse or Query message: the SQL text, NUL-terminated);
#: "BEGIN ... READ COMMITTED" must not match
COMMIT_STATEMENT = b"COMMIT\x00"
#: the longest a heal waits past its planned time for a late-engaged blackhole to have held ``hold_ms``
HOLD_GRACE_S = 2.5


class Routes:
    """One fault proxy per worker slot in front of ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int], workers: int):
        self.upstream = upstream
        # the scanner: a COMMIT psycopg has prepared crosses the wire as a bare Bind
        self.proxies = [FaultProxy(*upstream, scanner=FrontendScanner) for _ in range(workers)]

    def spec_for(self, spec: dict, t: int) -> dict:
        """Slot ``t``'s backend spec: the same, with its DSN through its own proxy."""
        return dict(spec, dsn=make_conninfo(spec["dsn"], host="127.0.0.1", port=str(self.proxies[t].port)))

    def cut(self, t: int, mode: str, after: int | str | None = None) -> None:
        """Cut slot ``t``'s route now, or (blackhole) once ``after`` more requests
        (an int) or the next COMMIT (``"commit"``) went through."""
        if mode == "blackhole":
            p = self.proxies[t]
            p.blackholed_at = None
            if after == "commit":
                p.blackhole_after = COMMIT_STATEMENT
            elif after:
                p.blackhole_after = int(after)
            else:
                p.engage_blackhole()
        elif mode == "refuse":
            self.proxies[t].refuse()
        else:
            raise ValueError(f"partition mode {mode!r}: expected {' or '.join(MODES)}")

    def heal(self, t: int) -> None:
        self.proxies[t].heal()

    def heal_all(self) -> None:
        for p in self.proxies:
            p.heal()

    def close(self) -> None:
        for p in self.proxies:
            p.close()


def package(opts: dict) -> Package:
    mode = opts.get("partition_mode", "mixed")
    if mode not in (*MODES, "mixed"):
        raise ValueError(f"partition_mode {mode!r}: expected blackhole, refuse or mixed")
    workers = opts.get("workers", 1)

    after_mode = opts.get("partition_after", "commit")
    if after_mode not in ("commit", "requests", "renew"):
        raise ValueError(f"partition_after {after_mode!r}: expected commit, requests or renew")

    def draw(s, n):
        if after_mode == "renew":   # the cut-off holder is whoever renews next: no slot is drawn
            hold, s = s.randint(*opts.get("partition_hold_ms", (1600, 2300)))
            return {"targets": [], "mode": "blackhole", "after": "renew", "hold_ms": hold}, s
        targets, s = draw_targets(s, n, most=max(1, min(n - 1, opts.get("partition_most", n // 2))))
        m = mode
        if m == "mixed":
            m, s = s.choice(MODES)
        value = {"targets": targets, "mode": m}
        if m == "blackhole":
            if opts.get("partition_after", "commit") == "requests":
                after, s = s.randint(1, 6)
            else:
                after = "commit"
            hold, s = s.randint(*opts.get("partition_hold_ms", (1600, 2300)))
            value.update(after=after, hold_ms=hold)
        return value, s

    def execute(env, op):
        routes = getattr(env, "routes", None)
        if routes is None:
            raise RuntimeError("workers do not reach the server through per-worker routes")
        targets, m = op["value"]["targets"], op["value"]["mode"]
        if op["value"].get("after") == "renew":
            cuts = env.partition_base.setdefault("renew-cuts", [])
            if op["f"] == "partition-heal":   # the coverage counts a cut once its holder acted (renew_cut.settle)
                return cuts[-1].wait_and_heal(op["value"]["hold_ms"] / 1000, len(env.slots)) if cuts else \
                    {"at": "renew", "healed": [], "took_effect": False, "note": "no cut was armed"}
            cuts.append(renew_cut.RenewCut(env))
            return {"cut": "the next renew", "mode": m, "after": "renew", "took_effect": None}
        if op["f"] == "partition-heal":
            base = env.partition_base.pop(tuple(targets), None) or {}
            if m == "blackhole":   # hold for hold_ms from the moment the link really failed
                hold = op["value"]["hold_ms"] / 1000
                limit = time.monotonic() + HOLD_GRACE_S
                for t in targets:
                    at = routes.proxies[t].blackholed_at
                    while at is not None and time.monotonic() < min(at + hold, limit):
                        time.sleep(0.01)
            engaged = {t: routes.proxies[t].blackholed_at for t in targets}
            for t in targets:
                routes.heal(t)
            held = sum(routes.proxies[t].held for t in targets) - base.get("held", 0)
            infos = sum(env.slots[t].indeterminate for t in targets) - base.get("infos", 0)
            took = held > 0 or infos > 0
            if took:
                env.coverage.took_effect("partition")
            out = {"healed": targets, "mode": m, "held_chunks": held, "indeterminate_ops": infos, "took_effect": took}
            if m == "blackhole":   # how long each route really stalled (it fails at the worker's next requests)
                out["held_ms"] = {t: round((time.monotonic() - at) * 1000) if at else 0 for t, at in engaged.items()}
            return out
        env.partition_base[tuple(targets)] = {"held": sum(routes.proxies[t].held for t in targets),
                                              "infos": sum(env.slots[t].indeterminate for t in targets)}
        for t in targets:
            routes.cut(t, m, op["value"].get("after"))
        return {"cut": targets, "mode": m, "pids": [env.slots[t].pid for t in targets], "took_effect": None}

    def final(env):
        renew_cut.final(env)
        routes = getattr(env, "routes", None)
        if routes is not None:
            routes.heal_all()
        return {"took_effect": True}

    # renew: the heal follows the cut at once and waits there for its evidence (RenewCut.wait_and_heal)
    dur = (0, 0) if after_mode == "renew" else opts.get("partition_ms", (1600, 2300))
    gen = FaultCycle("partition", draw, workers, gap_ms=opts.get("partition_gap_ms", (1000, 3000)),
                     dur_ms=dur, heal="partition-heal")
    return Package("partition", gen, execute, final, "workers", heals=("partition-heal",),
                   waiting=renew_cut.waiting if after_mode == "renew" else None)


def cut_off_holders(history: list[dict], workers: int) -> list[dict]:
    """Lease holders cut off by a partition while a rival took their item over.

    For each partition window (the cut's completion to its heal's completion),
    every tuple whose last granted lease (ok acquire or renew, not released,
    granted before or during the window) belongs to a cut slot's process, and
    an ok acquire of that tuple during the window by a process of a slot that
    was NOT cut, under a higher epoch.
    A worker's slot is ``process % workers`` (the interpreter's numbering)."""
    held: dict[tuple, dict] = {}     # tuple -> {"process", "epoch", "index"}
    windows: list[dict] = []
    out = []
    for op in history:
        f, typ = op.get("f"), op.get("type")
        if op.get("process") == "nemesis":
            v = op.get("value") or {}
            if f == "partition" and typ == "ok" and "cut" in v:
                cut = set(v["cut"])
                windows.append({"cut": cut, "from": op["index"], "holders": {
                    k: h for k, h in held.items() if h["process"] % workers in cut}})
            elif f == "partition-heal" and typ == "ok":
                for w in windows:
                    w.setdefault("to", op["index"])
            continue
        if typ != "ok" or f not in ("acquire", "renew", "release"):
            continue
        result = ((op.get("value") or {}).get("envelope") or {}).get("result") or {}
        rb = result.get("read_back") or {}
        key = (rb.get("ledger_namespace"), rb.get("item_id"))
        if f == "release":
            held.pop(key, None)
            continue
        epoch = int((result.get("claim") or {}).get("epoch", 0))
        for w in windows:
            if "to" not in w and op["process"] % workers in w["cut"]:
                w["holders"][key] = {"process": op["process"], "epoch": epoch, "index": op["index"]}
        if f == "acquire":
            for w in windows:
                h = w["holders"].get(key)
                if (h and "to" not in w and op["process"] % workers not in w["cut"] and epoch > h["epoch"]):
                    out.append({"tuple": list(key), "holder": h["process"], "holder_epoch": h["epoch"],
                                "holder_index": h["index"], "rival": op["process"], "rival_epoch": epoch,
                                "rival_index": op["index"], "cut": sorted(w["cut"]), "cut_index": w["from"]})
                    del w["holders"][key]   # its first rival is the takeover
        held[key] = {"process": op["process"], "epoch": epoch, "index": op["index"]}
    return out
