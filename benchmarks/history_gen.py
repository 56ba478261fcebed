"""A seeded generator of realistic claim-chaos histories, for scale benchmarks.

    python benchmarks/history_gen.py --ops 1000000 --seed 1 --out DIR

writes ``DIR/history.jsonl`` and ``DIR/results.json`` (its ``ctx``: the
capabilities and the seeded durable state), so ``chaos check DIR`` checks it
like a stored run. Every reply is a real reply of the reference backend
(``backends.reference``, a correct backend), so the history is valid and
every checker must say so.

What makes it realistic (the shape of a long ``chaos run``):

* many workers (``--workers``) running the claims agent loop - read, acquire
  with the read's witness, sometimes renew, publish a valid successor item
  against the revision they know, sometimes retry it blindly, release - on
  tuples drawn with a hot set (``--items`` per ``--namespaces``), so leases
  contend, expire, get taken over, fences go stale and revisions conflict;
* ops overlap: each op is invoked, run and completed at three different
  scheduler steps, interleaved with the other workers';
* ``info`` ops: lost replies after a commit, workers that crash before the
  call runs; a retired worker's slot continues under a new process and owner,
  and a publish that ended ``info`` is recovered as the contract says (read
  the outcome, retry the same request when it was not found);
* backend restarts and the backend's clock moving both ways: backward steps
  (the durable floor must hold) and forward jumps (leases expire early);
* a final phase like the runner's: leases expire, every tuple is read back,
  the durable state is exported as ``final-state`` records.

Speed: candidate validation parses each item's YAML front matter, about
0.1 ms per publish with libyaml (0.5 ms with PyYAML's pure parser); the candidates here come from one canonical template per item
(only the title changes), so the generator validates one candidate per item
and reuses that verdict for its own later candidates of the item. Every
other step is the backend's own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from backends import engine as _engine  # noqa: E402
from backends.api import FixedClock  # noqa: E402
from backends.reference import open_backend  # noqa: E402
from checkers.history import classify, final_state_records  # noqa: E402
from workloads.claims import ClaimsConfig, universe  # noqa: E402
from workloads.items import b64, item_fields, render, revision_of  # noqa: E402

T0 = 1_894_352_400_000  # 2030-01-11T09:00:00.000Z
STEP_NS = 1_000_000     # one scheduler step is 1 ms of the runner's monotonic clock


@dataclass(frozen=True)
class GenConfig:
    ops: int = 100_000
    seed: int = 1
    workers: int = 48
    namespaces: int = 4
    items: int = 200            # per namespace
    hot: float = 0.5            # share of cycles on the hot tenth of the tuples
    lease_ms: tuple = (300, 3000)
    step_ms: tuple = (0, 4)     # backend clock advance per scheduler step
    p_lost: float = 0.02        # the call commits, the reply is lost
    p_crash: float = 0.01       # the worker dies before the call runs
    p_restart: float = 0.0002   # per step: the backend restarts
    p_clock_back: float = 0.0005  # per step: the clock steps back 0.5-10 s
    p_clock_fwd: float = 0.0005   # per step: the clock jumps forward 2-20 s
    p_renew: float = 0.5
    p_publish: float = 0.8
    p_blind_retry: float = 0.1


class _Worker:
    __slots__ = ("pid", "owner", "phase", "key", "witness", "claim", "pending", "stage", "reply", "n",
                 "known", "pub_tries", "recover")

    def __init__(self, pid: int):
        self.pid, self.owner = pid, f"agent-p{pid}"
        self.phase, self.key, self.witness, self.claim = "read", None, None, None
        self.pending = None      # (f, request) in flight
        self.stage = 0           # 0 idle, 1 invoked, 2 ran
        self.reply = None
        self.n = 0
        self.known: dict = {}    # the revisions this worker has learnt from its own replies
        self.pub_tries = 0
        self.recover = None      # the publish request being recovered after an info


class Generator:
    def __init__(self, cfg: GenConfig, out):
        self.cfg, self.out = cfg, out
        self.rnd = random.Random(cfg.seed)
        self.world = universe(cfg.seed, ClaimsConfig(namespaces=cfg.namespaces, items=cfg.items))
        self.keys = list(self.world.tuples)
        self.hot = self.keys[: max(1, len(self.keys) // 10)]
        self.clock = FixedClock(T0)
        self.backend = open_backend({"namespaces": list(self.world.namespaces), "durable": self.world.durable()},
                                    self.clock)
        self.seeds = {k: revision_of(v) for k, v in self.world.seed_items.items()}
        self.index = 0
        self.step = 0
        self.ops = 0
        self.publish_ids: set = set()
        self.next_pid = cfg.workers
        self.workers = [_Worker(p) for p in range(cfg.workers)]
        self.capabilities = self.backend.call("capabilities", {}).envelope

    # ------------------------------------------------------------------ recording

    def emit(self, rec: dict) -> None:
        rec = {"index": self.index, **rec, "time": self.step * STEP_NS}
        self.out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
        self.out.write("\n")
        self.index += 1

    # ------------------------------------------------------------------ the agent loop

    def _request(self, w: _Worker) -> tuple[str, dict]:
        rnd, cfg = self.rnd, self.cfg
        if w.recover is not None:
            if w.phase == "pub-read":
                req = w.recover
                return "publication-read", {"operation_id": req["operation_id"], "ledger_namespace": req["ledger_namespace"],
                                            "item_id": req["item_id"]}
            return "publish", w.recover
        if w.phase == "read":
            w.key = rnd.choice(self.hot) if rnd.random() < cfg.hot else rnd.choice(self.keys)
        ns, item = w.key
        tup = {"ledger_namespace": ns, "item_id": item}
        if w.phase == "read":
            return "read", tup
        if w.phase == "acquire":
            return "acquire", {**tup, "owner_id": w.owner, "lease_duration_ms": rnd.randint(*cfg.lease_ms),
                               "expected": w.witness}
        c = w.claim
        if w.phase == "renew":
            return "renew", {**tup, "owner_id": w.owner, "epoch": c["epoch"], "expected_expires_at": c["expires_at"],
                             "lease_duration_ms": rnd.randint(*cfg.lease_ms)}
        if w.phase in ("publish", "blind-retry"):
            if w.phase == "blind-retry":
                return "publish", w.pending[1]
            w.n += 1
            data = render(item_fields(item, f"{w.owner} update {w.n}"), "Synthetic work item, updated by a chaos run.")
            req = {"operation_id": f"pub_{w.owner}_{w.n}", **tup, "expected_revision": w.known.get(w.key, self.seeds[w.key]),
                   "candidate_source_base64": b64(data), "candidate_sha256": revision_of(data),
                   "claim_fence": {**tup, "owner_id": w.owner, "epoch": c["epoch"]}}
            self.publish_ids.add((req["operation_id"], ns, item))
            return "publish", req
        return "release", {**tup, "owner_id": w.owner, "epoch": c["epoch"], "expected_expires_at": c["expires_at"]}

    def _after(self, w: _Worker, f: str, typ: str, envelope: dict | None) -> None:
        """The agent's next phase, from what the reply said (or did not)."""
        rnd, cfg = self.rnd, self.cfg
        env = envelope or {}
        result, err = env.get("result") or {}, env.get("error") or {}
        if typ == "info":
            return  # the worker is retired by the caller
        if w.recover is not None:
            if w.phase == "pub-read":
                if err.get("code") == "operation-not-found":
                    w.phase = "pub-retry"
                    return
                stdout = (result.get("outcome") or {}).get("stdout") or {}
                self._learn(w, (stdout.get("result") or {}).get("committed_revision"))
            elif typ == "ok":
                self._learn(w, result.get("committed_revision"))
            w.recover, w.phase = None, "read"
            return
        if f == "read":
            w.witness = {k: result["read_back"][k] for k in ("last_epoch", "active")} if typ == "ok" else None
            w.phase = "acquire" if typ == "ok" else "read"
        elif f == "acquire":
            w.claim = result.get("claim") if typ == "ok" else None
            nxt = "renew" if rnd.random() < cfg.p_renew else "publish" if rnd.random() < cfg.p_publish else "release"
            w.phase = nxt if typ == "ok" else "read"
        elif f == "renew":
            if typ == "ok":
                w.claim = result.get("claim")
            w.phase = "publish" if typ == "ok" else "read"
        elif f == "publish":
            if typ == "ok":
                self._learn(w, result.get("committed_revision"))
            elif err.get("code") == "ledger-revision-conflict":
                self._learn(w, (err.get("details") or {}).get("actual_revision"))
            if w.phase == "publish" and rnd.random() < cfg.p_blind_retry:
                w.phase = "blind-retry"
            elif err.get("code") == "ledger-revision-conflict" and w.pub_tries < 1:
                w.pub_tries, w.phase = w.pub_tries + 1, "publish"
            elif err.get("code") == "claim-fence-rejected":
                w.phase = "read"
            else:
                w.pub_tries, w.phase = 0, "release"
        else:  # release
            w.phase, w.claim = "read", None

    @staticmethod
    def _learn(w: _Worker, rev) -> None:
        if isinstance(rev, str):
            w.known[w.key] = rev

    def _retire(self, w: _Worker, publish_req: dict | None) -> None:
        nw = _Worker(self.next_pid)
        self.next_pid += 1
        if publish_req is not None:  # recover the publish under the new process (contract §6)
            nw.recover, nw.phase, nw.key = publish_req, "pub-read", (publish_req["ledger_namespace"],
                                                                     publish_req["item_id"])
        self.workers[self.workers.index(w)] = nw

    # ------------------------------------------------------------------ the schedule

    def _faults(self) -> None:
        rnd, cfg = self.rnd, self.cfg
        if rnd.random() < cfg.p_restart:
            self.emit({"process": "nemesis", "type": "invoke", "f": "restart", "value": {"target": "backend"}})
            self.backend.restart()
            self.emit({"process": "nemesis", "type": "ok", "f": "restart", "value": {"took_effect": True}})
        move = 0
        if rnd.random() < cfg.p_clock_back:
            move = -rnd.randint(500, 10_000)
        elif rnd.random() < cfg.p_clock_fwd:
            move = rnd.randint(2_000, 20_000)
        if move:
            self.emit({"process": "nemesis", "type": "invoke", "f": "clock", "value": {"offset_ms": move}})
            self.clock.set(self.clock.ms + move)
            self.emit({"process": "nemesis", "type": "ok", "f": "clock", "value": {"took_effect": True}})

    def run(self) -> None:
        rnd, cfg = self.rnd, self.cfg
        budget = cfg.ops - len(self.keys)  # the final phase reads every tuple back
        while self.ops < budget:
            self.step += 1
            self.clock.set(self.clock.ms + rnd.randint(*cfg.step_ms))
            self._faults()
            w = rnd.choice(self.workers)
            if w.stage == 0:
                w.pending = self._request(w)
                w.stage = 1
                self.ops += 1
                self.emit({"process": w.pid, "type": "invoke", "f": w.pending[0], "value": w.pending[1]})
            elif w.stage == 1:
                if rnd.random() < cfg.p_crash:  # the worker dies before its call reaches the backend
                    self.emit({"process": w.pid, "type": "info", "f": w.pending[0],
                               "error": "worker host killed before the call"})
                    self._retire(w, w.pending[1] if w.pending[0] == "publish" else None)
                    continue
                w.reply = self.backend.call(*w.pending)
                w.stage = 2
            else:
                f, req = w.pending
                w.stage = 0
                if rnd.random() < cfg.p_lost:
                    self.emit({"process": w.pid, "type": "info", "f": f, "error": "reply lost (worker killed)"})
                    self._retire(w, req if f == "publish" else None)
                    continue
                typ = classify(w.reply.exit, w.reply.envelope)
                self.emit({"process": w.pid, "type": typ, "f": f, "wall_ms": self.clock.ms,
                           "value": {"exit": w.reply.exit, "envelope": w.reply.envelope}})
                if typ == "info":
                    self._retire(w, req if f == "publish" else None)
                    continue
                self._after(w, f, typ, w.reply.envelope)
        self._final()

    def _final(self) -> None:
        """The runner's final phase: open ops stay open, leases expire, every tuple is read back."""
        self.step += 10
        self.clock.set(self.clock.ms + max(self.cfg.lease_ms) + 200)
        reader = self.next_pid + 1
        for ns, item in self.keys:
            req = {"ledger_namespace": ns, "item_id": item}
            self.emit({"process": reader, "type": "invoke", "f": "read", "value": req})
            r = self.backend.call("read", req)
            self.emit({"process": reader, "type": classify(r.exit, r.envelope), "f": "read", "wall_ms": self.clock.ms,
                       "value": {"exit": r.exit, "envelope": r.envelope}})
            self.ops += 1
        for rec in final_state_records(self.backend.store.export_durable()):
            self.emit(rec)


@contextlib.contextmanager
def _reuse_candidate_verdicts():
    """While generating: validate one candidate per item, reuse the verdict
    (see the module docstring); the engine is restored afterwards."""
    original = _engine.ledger_invalid_details
    verdicts: dict = {}

    def cached(candidate: bytes, item_id: str, current):
        key = (item_id, current is None)
        if key not in verdicts:
            verdicts[key] = original(candidate, item_id, current)
        return verdicts[key]

    _engine.ledger_invalid_details = cached
    try:
        yield
    finally:
        _engine.ledger_invalid_details = original


def generate(cfg: GenConfig, out_dir: str) -> dict:
    """Write ``out_dir/history.jsonl`` and ``results.json``; returns a summary."""
    os.makedirs(out_dir, exist_ok=True)
    t = time.perf_counter()
    path = os.path.join(out_dir, "history.jsonl")
    with open(path + ".tmp", "w", encoding="utf-8") as f, _reuse_candidate_verdicts():
        g = Generator(cfg, f)
        g.run()
    os.replace(path + ".tmp", path)
    results = {"schema_version": 1, "ctx": {"capabilities": g.capabilities, "initial_durable": g.world.durable(),
                                            "backend": "reference", "workload": "claims"},
               "generator": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f)
    return {"ops": g.ops, "entries": g.index, "processes": g.next_pid, "seconds": round(time.perf_counter() - t, 1),
            "bytes": os.path.getsize(path)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=GenConfig.workers)
    ap.add_argument("--namespaces", type=int, default=GenConfig.namespaces)
    ap.add_argument("--items", type=int, default=GenConfig.items, help="items per namespace")
    ap.add_argument("--out", required=True, help="the run directory to write")
    args = ap.parse_args()
    cfg = GenConfig(ops=args.ops, seed=args.seed, workers=args.workers, namespaces=args.namespaces, items=args.items)
    print(json.dumps(generate(cfg, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
