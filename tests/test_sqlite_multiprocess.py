"""Many OS processes on one SQLite file: the BEGIN IMMEDIATE boundary must
serialize their decisions. 4 processes x 50 acquire/release attempts on 2
items; afterwards the successful acquires of each tuple must carry the epochs
1..N exactly once (no lost update, no gap), each released by its holder, and
no acquire of epoch e+1 may complete before the release of epoch e began."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import defaultdict

from test_sqlite_support import ITEM, ITEM2, NS1, new_db

WORKER = textwrap.dedent("""
    import json, sys, time
    from backends.api import Hooks, SystemClock
    from backends.sqlite import SqliteBackend
    path, owner, items, cycles = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
    ns = "%(ns)s"
    b = SqliteBackend({"path": path}, SystemClock(), Hooks())
    out = []
    for i in range(cycles):
        item = items[i %% len(items)]
        rb = b.call("read", {"ledger_namespace": ns, "item_id": item}).envelope["result"]["read_back"]
        t0 = time.monotonic_ns()
        r = b.call("acquire", {"ledger_namespace": ns, "item_id": item, "owner_id": owner,
                               "lease_duration_ms": 600000,
                               "expected": {"last_epoch": rb["last_epoch"], "active": rb["active"]}})
        t1 = time.monotonic_ns()
        if r.exit != 0:
            out.append({"f": "acquire", "item": item, "exit": r.exit, "code": r.envelope["error"]["code"]})
            continue
        claim = r.envelope["result"]["claim"]
        t2 = time.monotonic_ns()
        rel = b.call("release", {"ledger_namespace": ns, "item_id": item, "owner_id": owner,
                                 "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"]})
        t3 = time.monotonic_ns()
        out.append({"f": "cycle", "item": item, "epoch": int(claim["epoch"]), "owner": claim["owner_id"],
                    "acq": [t0, t1], "rel": [t2, t3], "rel_exit": rel.exit})
    b.close()
    print(json.dumps(out))
""") % {"ns": NS1}


def test_four_processes_fifty_cycles_give_gapless_exclusive_epochs(tmp_path):
    path = new_db(str(tmp_path), seed=False)
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, path, f"owner-{k}", f"{ITEM},{ITEM2}", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        for k in range(4)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err.decode()[-2000:]
            results.extend(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    cycles = [r for r in results if r["f"] == "cycle"]
    refusals = [r for r in results if r["f"] == "acquire"]
    assert {r["code"] for r in refusals} <= {"claim-held", "claim-conflict"}
    assert all(c["rel_exit"] == 0 for c in cycles), "a holder could not release its own claim"
    by_item = defaultdict(list)
    for c in cycles:
        by_item[c["item"]].append(c)
    durable = {(r["ledger_namespace"], r["item_id"]): r
               for r in __import__("backends.sqlite", fromlist=["SqliteStore"]).SqliteStore(path)
               .export_durable()["claims"]}
    for item, cs in by_item.items():
        cs.sort(key=lambda c: c["epoch"])
        assert [c["epoch"] for c in cs] == list(range(1, len(cs) + 1)), f"{item}: epochs not gapless/unique"
        assert durable[(NS1, item)]["last_epoch"] == str(len(cs)) and durable[(NS1, item)]["active"] is None
        for prev, nxt in zip(cs, cs[1:]):
            # epoch e+1 was granted only after epoch e's release was sent
            assert nxt["acq"][1] > prev["rel"][0], f"{item}: epoch {nxt['epoch']} overlaps {prev['epoch']}"
    assert set(by_item) == {ITEM, ITEM2} and len(cycles) >= 20, (len(cycles), len(refusals))


def test_threads_sharing_one_backend_get_their_own_transactions(tmp_path):
    """A host serves calls in threads over one SqliteBackend: the connection
    pool must give every concurrent transaction its own connection."""
    import threading

    from backends.api import Hooks, SystemClock
    from backends.sqlite import SqliteBackend

    path = new_db(str(tmp_path), seed=False)
    backend = SqliteBackend({"path": path}, SystemClock(), Hooks())
    granted: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def agent(owner: str) -> None:
        try:
            _cycles(owner)
        except BaseException as e:  # an assert in a thread would otherwise pass silently
            failures.append(repr(e))

    def _cycles(owner: str) -> None:
        for _ in range(25):
            rb = backend.call("read", {"ledger_namespace": NS1, "item_id": ITEM}).envelope["result"]["read_back"]
            r = backend.call("acquire", {"ledger_namespace": NS1, "item_id": ITEM, "owner_id": owner,
                                         "lease_duration_ms": 600000,
                                         "expected": {"last_epoch": rb["last_epoch"], "active": rb["active"]}})
            if r.exit == 0:
                claim = r.envelope["result"]["claim"]
                with lock:
                    granted.append(int(claim["epoch"]))
                rel = backend.call("release", {"ledger_namespace": NS1, "item_id": ITEM, "owner_id": owner,
                                               "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"]})
                assert rel.exit == 0
            else:
                assert r.envelope["error"]["code"] in ("claim-held", "claim-conflict"), r.envelope

    threads = [threading.Thread(target=agent, args=(f"thread-{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    backend.close()
    assert failures == []
    assert sorted(granted) == list(range(1, len(granted) + 1)) and granted
