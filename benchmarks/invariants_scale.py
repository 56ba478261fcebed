"""Scale benchmark of the invariant checkers.

Generates a synthetic but consistent valid history - many tuples over two
namespaces, each worker cycling read -> acquire -> renew -> publish -> release
with backend decision times that only move forward per namespace, K workers'
ops overlapping (K invokes, then K completions) - and runs every invariant
checker on it, printing seconds per checker, the total, and peak memory.

    python benchmarks/invariants_scale.py [--entries 1000000] [--workers 8] [--items 20000]

``--entries`` counts history lines (an op is an invoke plus a completion).
Peak memory is the process's max RSS (history included) plus the tracemalloc
peak of the checking phase alone when ``--tracemalloc`` is given (slower).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import resource
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from backends.contract.values import format_instant  # noqa: E402
from checkers.invariants import INVARIANTS  # noqa: E402
from checkers.history import History  # noqa: E402

NS = ["wbns_" + "1" * 32, "wbns_" + "2" * 32]
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
T0 = 1_894_352_400_000
LEASE = 30_000


def item_id(n: int) -> str:
    return "wb_01Q4837BM01W70T" + "".join(ALPHABET[(n >> (5 * k)) & 31] for k in range(8))


def rev(key: tuple, n: int) -> str:
    return "sha256:" + hashlib.sha256(f"{key}:{n}".encode()).hexdigest()


class Gen:
    def __init__(self, entries: int, workers: int, items: int):
        self.entries, self.workers, self.items = entries, workers, items
        self.h: list[dict] = []
        self.now = {ns: T0 for ns in NS}
        self.state: dict[tuple, dict] = {}

    def add(self, pid, type_, f, value):
        self.h.append({"index": len(self.h), "time": len(self.h) * 1000, "process": pid, "type": type_,
                       "f": f, "value": value})

    def tick(self, ns: str) -> int:
        self.now[ns] += 7
        return self.now[ns]

    def rb(self, key, t, st):
        return {"ledger_namespace": key[0], "item_id": key[1], "observed_at": format_instant(t),
                "last_epoch": str(st["epoch"]), "active": dict(st["active"]) if st["active"] else None}

    def claim_env(self, cmd, key, t, st, result_key="claim"):
        res = {"read_back": self.rb(key, t, st)}
        if result_key:
            res[result_key] = dict(st["active"] or st["released"])
        return {"exit": 0, "envelope": {"ok": True, "namespace": "work-claim", "command": cmd, "contract_version": 1,
                                        "state": "committed", "result": res}}

    def step(self, pid: int, key: tuple, phase: int):
        """The request of phase ``phase`` of the cycle, and a function deciding it."""
        ns, item = key
        st = self.state.setdefault(key, {"epoch": 0, "active": None, "rev": rev(key, 0), "n": 0, "released": None})
        owner = f"agent-{pid}-{st['epoch']}"
        base = {"ledger_namespace": ns, "item_id": item}
        if phase == 0:
            return "read", base, lambda t: self.claim_env("read", key, t, st, None)
        if phase == 1:
            req = {**base, "owner_id": owner, "lease_duration_ms": LEASE,
                   "expected": {"last_epoch": str(st["epoch"]), "active": None}}

            def acquire(t):
                st["epoch"] += 1
                st["active"] = {"owner_id": f"agent-{pid}-{st['epoch'] - 1}", "epoch": str(st["epoch"]),
                                "issued_at": format_instant(t), "expires_at": format_instant(t + LEASE)}
                return self.claim_env("acquire", key, t, st)
            return "acquire", req, acquire
        a = st["active"]
        if phase == 2:
            req = {**base, "owner_id": a["owner_id"], "epoch": a["epoch"], "expected_expires_at": a["expires_at"],
                   "lease_duration_ms": LEASE}

            def renew(t):
                a["expires_at"] = format_instant(t + LEASE)
                return self.claim_env("renew", key, t, st)
            return "renew", req, renew
        if phase == 3:
            st["n"] += 1
            cand = rev(key, st["n"])
            fence = {**base, "owner_id": a["owner_id"], "epoch": a["epoch"]}
            req = {"operation_id": f"pub_{pid}_{len(self.h)}", **base, "expected_revision": st["rev"],
                   "candidate_source_base64": base64.b64encode(cand.encode()).decode(), "candidate_sha256": cand,
                   "claim_fence": fence}

            def publish(t):
                st["rev"] = cand
                return {"exit": 0, "envelope": {
                    "ok": True, "namespace": "ledger-publication", "command": "publish-claimed",
                    "contract_version": 1, "state": "committed", "operation_id": req["operation_id"],
                    "result": {**base, "committed_revision": cand, "claim_fence": dict(fence),
                               "claim_read_back": self.rb(key, t, st)}}}
            return "publish", req, publish
        req = {**base, "owner_id": a["owner_id"], "epoch": a["epoch"], "expected_expires_at": a["expires_at"]}

        def release(t):
            st["released"], st["active"] = st["active"], None
            return self.claim_env("release", key, t, st, "released_claim")
        return "release", req, release

    def build(self) -> tuple[list[dict], dict]:
        keys = [(NS[i % 2], item_id(i)) for i in range(self.items)]
        initial = {f"{k[0]}/{k[1]}": rev(k, 0) for k in keys}
        cursor = {p: (keys[p % len(keys)], 0) for p in range(self.workers)}
        next_key = self.workers
        while len(self.h) < self.entries:
            batch = []
            for p in range(self.workers):
                key, phase = cursor[p]
                f, req, decide = self.step(p, key, phase)
                self.add(p, "invoke", f, req)
                batch.append((p, key, phase, f, decide))
            for p, key, phase, f, decide in batch:
                self.add(p, "ok", f, decide(self.tick(key[0])))
                if phase == 4:
                    cursor[p] = (keys[next_key % len(keys)], 0)
                    next_key += 1
                else:
                    cursor[p] = (key, phase + 1)
        caps = {"ok": True, "namespace": "work-claim", "command": "capabilities", "contract_version": 1, "result": {
            "backend": {"name": "synthetic", "coordination_scope": "shared-transactional-coordinator",
                        "ledger_binding": {"mode": "explicit-allowlist", "namespaces": NS}},
            "operations": {"work_claim": {
                "supported": True, "api_version": 1, "mode": "fenced", "claim_protected_publication": True,
                "fencing_enforced_at": "ledger-publication-commit-boundary", "safe_exclusive_dispatch": True,
                "write_paths": {"alternate": "none", "claimed_publication_v1": "atomic-fence",
                                "legacy_create_v1": "reject-claimed-id",
                                "legacy_transition_v1": "reject-active-claim"}}}}}
        return self.h, {"backend": "synthetic", "capabilities": caps, "initial_revisions": initial}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--tracemalloc", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    history, ctx = Gen(args.entries, args.workers, args.items).build()
    gen_s = time.perf_counter() - t0
    rss_after_gen = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"history: {len(history):,} entries ({len(history) // 2:,} ops), {args.items:,} tuples, "
          f"{args.workers} overlapping workers; generated in {gen_s:.1f}s; max RSS {rss_after_gen:.0f} MiB")
    if args.tracemalloc:
        tracemalloc.start()
    total = 0.0
    failed = []
    if True:
        t = time.perf_counter()
        history = History.of(history)
        dt = time.perf_counter() - t
        total += dt
        print(f"{'History.of (one pass)':<24} {dt:7.2f}s")
        for name, check in INVARIANTS.items():
            t = time.perf_counter()
            r = check(history, ctx)
            dt = time.perf_counter() - t
            total += dt
            print(f"{name:<24} {dt:7.2f}s  valid={r['valid']}")
            if r["valid"] is not True:
                failed.append((name, r["anomalies"][:1]))
    print(f"{'total':<24} {total:7.2f}s  ({len(history) / total:,.0f} entries/s)")
    if args.tracemalloc:
        _cur, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc peak during checking: {peak / 2**20:.0f} MiB")
    print(f"max RSS (history + checking): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    for name, a in failed:
        print(f"UNEXPECTED: {name} judged the synthetic valid history not valid: {a}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
