"""Support for the invariant tests: a history recorder and a simulated
concurrent workload driven against the real reference backend.

``simulate(seed, ...)`` runs several simulated workers (read, acquire, renew,
publish, release, publication-read, identical publish retries) against
``backends.reference`` with a hand-set clock. Each op is recorded as an
invoke, then executed at some later scheduler step, then completed at a later
step still, so ops of different workers overlap in the history exactly as they
would in a real run. Some completions are lost (recorded ``info`` although the
call ran), some calls never run (``info``), the clock sometimes steps back,
and the backend is sometimes restarted. Everything in the history is a real
reply of the reference model: a correct backend, so every invariant must hold.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import random

from backends.api import FixedClock
from backends.reference import open_backend
from checkers.history import classify

NS = ["wbns_" + "1" * 32, "wbns_" + "2" * 32]
BASE_ITEM = "wb_01Q4837BM01W70T30B184GG1"
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
T0 = 1_894_352_400_000  # 2030-01-11T09:00:00.000Z

_TEMPLATE = """---
schema_version: 1
id: {item}
title: "{title}"
kind: task
status: in-progress
created: 2030-01-11
updated: 2030-01-11
provenance:
  source: "fixture/work-claims"
  recorded_at: "2030-01-11T08:00:00Z"
depends_on: []
related: []
decisions:
  - action: accept
    date: 2030-01-11
    summary: "Accept the fictional chart update."
    rationale: "The synthetic item is ready for a claimed publication vector."
---

A fictional ledger item.
"""


def item_id(n: int) -> str:
    return BASE_ITEM + ALPHABET[n // 32 % 32] + ALPHABET[n % 32]


def ledger_bytes(item: str, title: str) -> bytes:
    return _TEMPLATE.format(item=item, title=title).encode()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Recorder:
    """Appends history entries the way the runner does (index, time, process, type, f, value)."""

    def __init__(self) -> None:
        self.history: list[dict] = []

    def add(self, process, type_: str, f: str, value=None, **extra) -> dict:
        rec = {"index": len(self.history), "time": len(self.history) * 1000, "process": process,
               "type": type_, "f": f, "value": value, **extra}
        self.history.append(rec)
        return rec

    def invoke(self, process, f: str, request: dict) -> None:
        self.add(process, "invoke", f, copy.deepcopy(request))

    def complete(self, process, f: str, exit_code: int, envelope: dict) -> None:
        self.add(process, classify(exit_code, envelope), f, {"exit": exit_code, "envelope": copy.deepcopy(envelope)})

    def lost(self, process, f: str, why: str = "lost reply") -> None:
        self.add(process, "info", f, None, error=why)


def tuples(n_items: int, n_ns: int = 1) -> list[tuple[str, str]]:
    return [(NS[k % n_ns], item_id(k)) for k in range(n_items)]


def seed_durable(keys) -> tuple[dict, dict]:
    ledgers, revs = [], {}
    for ns, item in keys:
        data = ledger_bytes(item, "seed")
        ledgers.append({"ledger_namespace": ns, "item_id": item, "revision": sha(data),
                        "source_base64": base64.b64encode(data).decode()})
        revs[f"{ns}/{item}"] = sha(data)
    return {"clock_floors": [], "claims": [], "ledgers": ledgers, "publication_outcomes": []}, revs


class Worker:
    def __init__(self, pid: int, key: tuple[str, str]):
        self.pid, self.key = pid, key
        self.owner = f"agent-{pid}"
        self.witness: dict | None = None  # {last_epoch, active} from the latest reply
        self.claim: dict | None = None
        self.pending: tuple[str, dict] | None = None
        self.reply = None
        self.ran = False
        self.n = 0


def simulate(seed: int, n_workers: int = 3, steps: int = 200, n_items: int = 2, n_ns: int = 1,
             p_lost: float = 0.05, p_crash: float = 0.03, p_restart: float = 0.01,
             p_backstep: float = 0.05) -> tuple[list[dict], dict]:
    """A history of the reference backend under a random schedule, and its ctx."""
    rnd = random.Random(seed)
    keys = tuples(n_items, n_ns)
    durable, revs = seed_durable(keys)
    clock = FixedClock(T0)
    backend = open_backend({"namespaces": NS[:max(n_ns, 1)] if n_ns > 1 else NS[:1], "durable": durable}, clock)
    rec = Recorder()
    caps = backend.call("capabilities", {})
    revision = {k: revs[f"{k[0]}/{k[1]}"] for k in keys}  # the workload's belief, learnt from replies
    retry_pool: list[dict] = []
    published: list[dict] = []
    next_pid = [n_workers]
    workers = [Worker(p, rnd.choice(keys)) for p in range(n_workers)]

    def retire(w: Worker) -> None:
        nw = Worker(next_pid[0], rnd.choice(keys))
        next_pid[0] += 1
        workers[workers.index(w)] = nw

    def learn(w: Worker, f: str, env: dict) -> None:
        r = env.get("result") or {}
        d = (env.get("error") or {}).get("details") or {}
        rb = r.get("read_back") or r.get("claim_read_back") or (d if "last_epoch" in d else None)
        if rb and rb.get("item_id") == w.key[1]:
            w.witness = {"last_epoch": rb["last_epoch"], "active": rb["active"]}
        if env.get("ok") and f in ("acquire", "renew"):
            w.claim = r["claim"]
        elif f in ("release",) and env.get("ok"):
            w.claim = None
        elif f in ("renew", "release") and not env.get("ok"):
            w.claim = None
        if f == "publish":
            if env.get("ok"):
                revision[w.key] = r["committed_revision"]
            elif d.get("actual_revision"):
                revision[w.key] = d["actual_revision"]

    def next_request(w: Worker) -> tuple[str, dict]:
        ns, item = w.key
        if retry_pool and rnd.random() < 0.3:
            return "publish", retry_pool.pop(rnd.randrange(len(retry_pool)))
        if published and rnd.random() < 0.1:
            p = rnd.choice(published)
            return "publication-read", {"operation_id": p["operation_id"], "ledger_namespace": p["ledger_namespace"],
                                        "item_id": p["item_id"]}
        if w.claim is None:
            if w.witness is None or rnd.random() < 0.2:
                return "read", {"ledger_namespace": ns, "item_id": item}
            return "acquire", {"ledger_namespace": ns, "item_id": item, "owner_id": w.owner,
                               "lease_duration_ms": rnd.choice([500, 2000, 5000]), "expected": w.witness}
        c = w.claim
        roll = rnd.random()
        if roll < 0.3:
            return "renew", {"ledger_namespace": ns, "item_id": item, "owner_id": w.owner, "epoch": c["epoch"],
                             "expected_expires_at": c["expires_at"], "lease_duration_ms": rnd.choice([500, 2000, 5000])}
        if roll < 0.8:
            w.n += 1
            data = ledger_bytes(item, f"{w.owner} v{w.n}")
            req = {"operation_id": f"pub_{w.owner}_{w.n}", "ledger_namespace": ns, "item_id": item,
                   "expected_revision": revision[w.key], "candidate_source_base64": base64.b64encode(data).decode(),
                   "candidate_sha256": sha(data),
                   "claim_fence": {"ledger_namespace": ns, "item_id": item, "owner_id": w.owner, "epoch": c["epoch"]}}
            published.append(req)
            return "publish", req
        return "release", {"ledger_namespace": ns, "item_id": item, "owner_id": w.owner, "epoch": c["epoch"],
                           "expected_expires_at": c["expires_at"]}

    for _ in range(steps):
        if rnd.random() < p_restart:
            rec.add("nemesis", "info", "restart", {"target": "backend"})
            backend.restart()
            continue
        w = rnd.choice(workers)
        if w.pending is None:
            w.pending = next_request(w)
            w.ran = False
            rec.invoke(w.pid, *w.pending)
        elif not w.ran:
            if rnd.random() < p_crash:  # the call never reached the backend
                rec.lost(w.pid, w.pending[0], "worker crashed before the call")
                retire(w)
                continue
            step = rnd.randint(0, 1500)
            clock.set(clock.ms + (-rnd.randint(1, 3000) if rnd.random() < p_backstep else step))
            w.reply = backend.call(w.pending[0], w.pending[1])
            w.ran = True
        else:
            f, req = w.pending
            w.pending = None
            if rnd.random() < p_lost:  # committed, reply lost
                rec.lost(w.pid, f)
                if f == "publish":
                    retry_pool.append(req)
                retire(w)
                continue
            rec.complete(w.pid, f, w.reply.exit, w.reply.envelope)
            if classify(w.reply.exit, w.reply.envelope) == "info":
                if f == "publish":
                    retry_pool.append(req)
                retire(w)
                continue
            learn(w, f, w.reply.envelope)

    # final phase: open ops are left open (indeterminate); a fresh reader reads everything back
    clock.set(clock.ms + 10_000)
    reader = next_pid[0] + 1
    for ns, item in keys:
        req = {"ledger_namespace": ns, "item_id": item}
        rec.invoke(reader, "read", req)
        r = backend.call("read", req)
        rec.complete(reader, "read", r.exit, r.envelope)
    for p in published:
        req = {"operation_id": p["operation_id"], "ledger_namespace": p["ledger_namespace"], "item_id": p["item_id"]}
        rec.invoke(reader, "publication-read", req)
        r = backend.call("publication-read", req)
        rec.complete(reader, "publication-read", r.exit, r.envelope)
    rec.add("nemesis", "info", "final-state", {"durable": backend.store.export_durable()})
    ctx = {"backend": "reference", "capabilities": caps.envelope, "initial_revisions": revs}
    return rec.history, ctx


class Scenario:
    """A hand-scripted, sequential history against the reference backend:
    ``call(pid, f, request, at_ms)`` records the invoke and the real reply and
    returns the completion record (tests mutate it to make a history invalid)."""

    def __init__(self, n_items: int = 1, spec: dict | None = None):
        self.keys = tuples(n_items)
        durable, self.revs = seed_durable(self.keys)
        self.clock = FixedClock(T0)
        self.backend = open_backend({"namespaces": NS[:1], "durable": durable, **(spec or {})}, self.clock)
        self.rec = Recorder()
        self.caps = self.backend.call("capabilities", {}).envelope

    @property
    def history(self) -> list[dict]:
        return self.rec.history

    def ctx(self) -> dict:
        return {"backend": "reference", "capabilities": self.caps, "initial_revisions": self.revs}

    def call(self, pid, f: str, req: dict, at_ms: int = 0, lost: bool = False) -> dict:
        self.clock.set(T0 + at_ms)
        self.rec.invoke(pid, f, req)
        r = self.backend.call(f, req)
        if lost:
            self.rec.lost(pid, f)
        else:
            self.rec.complete(pid, f, r.exit, r.envelope)
        return self.rec.history[-1]

    def final(self) -> dict:
        return self.rec.add("nemesis", "info", "final-state", {"durable": self.backend.store.export_durable()})

    # request builders ---------------------------------------------------
    def key(self, k: int = 0) -> dict:
        ns, item = self.keys[k]
        return {"ledger_namespace": ns, "item_id": item}

    def acquire(self, owner: str, witness: dict, ms: int = 60_000, k: int = 0) -> dict:
        return {**self.key(k), "owner_id": owner, "lease_duration_ms": ms, "expected": witness}

    def renew(self, owner: str, claim: dict, ms: int = 60_000, k: int = 0) -> dict:
        return {**self.key(k), "owner_id": owner, "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"],
                "lease_duration_ms": ms}

    def release(self, owner: str, claim: dict, k: int = 0) -> dict:
        return {**self.key(k), "owner_id": owner, "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"]}

    def publish(self, oid: str, owner: str, epoch: str, expected: str, title: str, k: int = 0) -> dict:
        ns, item = self.keys[k]
        data = ledger_bytes(item, title)
        return {"operation_id": oid, **self.key(k), "expected_revision": expected,
                "candidate_source_base64": base64.b64encode(data).decode(), "candidate_sha256": sha(data),
                "claim_fence": {**self.key(k), "owner_id": owner, "epoch": epoch}}

    def seed_rev(self, k: int = 0) -> str:
        ns, item = self.keys[k]
        return self.revs[f"{ns}/{item}"]


def claim_of(completion: dict) -> dict:
    return completion["value"]["envelope"]["result"]["claim"]


def standard_scenario() -> tuple[Scenario, dict]:
    """Two owners take turns on one item: A acquires, renews, publishes, B is
    refused (claim-held), A releases, B takes epoch 2, publishes, retries its
    publish identically (a replay), both outcomes are read back, final state.
    Returns the scenario and a map of labelled completion records."""
    s = Scenario()
    L: dict = {}
    L["read"] = s.call(1, "read", s.key(), 0)
    L["a_acq"] = s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 1_000)
    a1 = claim_of(L["a_acq"])
    L["a_renew"] = s.call(1, "renew", s.renew("agent-a", a1), 10_000)
    a1 = claim_of(L["a_renew"])
    L["p1_req"] = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    L["p1"] = s.call(1, "publish", L["p1_req"], 20_000)
    L["b_held"] = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": a1}), 30_000)
    L["a_rel"] = s.call(1, "release", s.release("agent-a", a1), 40_000)
    L["b_acq"] = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 50_000)
    L["p2_req"] = s.publish("pub_b_1", "agent-b", "2", L["p1_req"]["candidate_sha256"], "b one")
    L["p2"] = s.call(2, "publish", L["p2_req"], 60_000)
    L["p2_retry"] = s.call(2, "publish", L["p2_req"], 61_000)
    L["stale"] = s.call(1, "publish", s.publish("pub_a_2", "agent-a", "1", L["p2_req"]["candidate_sha256"], "a two"),
                        62_000)
    L["r1"] = s.call(3, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 63_000)
    L["r2"] = s.call(3, "publication-read", {"operation_id": "pub_b_1", **s.key()}, 64_000)
    L["final_read"] = s.call(3, "read", s.key(), 65_000)
    L["final"] = s.final()
    return s, L
