"""Acknowledged claims and publications survive SIGKILL of the whole
PostgreSQL process tree mid-workload (fsync=on, synchronous_commit=on).

Four client threads (each its own store connection, disjoint items) run
acquire -> publish -> release cycles; a killer thread SIGKILLs the postmaster
and every child after a number of acknowledgements. After crash recovery
every acknowledged operation must be there.
"""

from __future__ import annotations

import threading

import pytest

from pg_fixtures import NS1, acquire_req, item_id, needs_pg, open_pg, publish_req, release_req, seeded

pytestmark = [needs_pg, pytest.mark.postgres]

WORKERS = 4
ITEMS_PER_WORKER = 60
KILL_AFTER_ACKS = 60


def test_acknowledged_ops_survive_sigkill_of_server_tree(pg):
    owner = open_pg(pg.dsn())
    schema = owner.store.schema
    items = [[item_id(w * 1000 + k) for k in range(ITEMS_PER_WORKER)] for w in range(WORKERS)]
    owner.store.seed(seeded([(NS1, it) for row in items for it in row]))
    acked: list[tuple] = []  # ("acquire", item, epoch) | ("publish", op_id, item, envelope) | ("release", item, epoch)
    lock = threading.Lock()
    enough = threading.Event()

    def ack(entry) -> None:
        with lock:
            acked.append(entry)
            if len(acked) >= KILL_AFTER_ACKS:
                enough.set()

    def worker(w: int) -> None:
        b = open_pg(pg.dsn(), schema=schema, deadline_s=5)
        try:
            for it in items[w]:
                r = b.call("acquire", acquire_req(NS1, it, f"agent-{w}"))
                if r.exit != 0:
                    return
                claim = r.envelope["result"]["claim"]
                ack(("acquire", it, claim["epoch"]))
                p = b.call("publish", publish_req(f"op-{it}", NS1, it, claim))
                if p.exit != 0:
                    return
                ack(("publish", f"op-{it}", it, p.envelope))
                if b.call("release", release_req(claim, NS1, it)).exit != 0:
                    return
                ack(("release", it, claim["epoch"]))
        except Exception:
            return  # a harness-level failure is indeterminate; only acks are checked
        finally:
            b.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
    [t.start() for t in threads]
    assert enough.wait(60), "workload made no progress"
    killed = pg.kill()  # SIGKILL postmaster + every backend, mid-workload
    [t.join(30) for t in threads]
    assert len(killed) > 1
    with lock:
        snapshot = list(acked)
    unfinished = sum(len(r) for r in items) * 3 - len(snapshot)
    assert unfinished > 0, "the kill came after the workload had finished"

    pg.start()  # crash recovery
    owner.restart()
    durable = owner.store.export_durable()
    claims = {c["item_id"]: c for c in durable["claims"]}
    outcomes = {o["operation_id"]: o for o in durable["publication_outcomes"]}
    ledgers = {x["item_id"]: x for x in durable["ledgers"]}
    for entry in snapshot:
        if entry[0] == "acquire":
            _, it, epoch = entry
            assert int(claims[it]["last_epoch"]) >= int(epoch)
        elif entry[0] == "publish":
            _, op, it, envelope = entry
            assert outcomes[op]["envelope"] == {"exit": 0, "stdout": envelope}
            assert ledgers[it]["revision"] == envelope["result"]["committed_revision"]
        else:
            _, it, epoch = entry
            assert claims[it]["last_epoch"] == epoch and claims[it]["active"] is None
    owner.close()
    owner.store.drop_created()
