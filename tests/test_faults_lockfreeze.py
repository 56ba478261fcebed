"""The write-release freeze (chaos.faults.lockfreeze, chaos.faults.incall):
a real process stops itself right after it ends a write transaction, holding
no lock, so a rival commits in the gap; and through the worker it exposes a
check-then-act fence that a timed freeze lands on almost never."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from contextlib import contextmanager

import psutil

from chaos.faults.lockfreeze import WriteReleaseFreeze
from chaos.worker import Slot
from proc_status import wait_status
from slot_env import seeded_sqlite
from workloads.items import publish_request, revision_of

CHILD = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=DELETE")
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "read":
        c.execute("BEGIN"); c.execute("select count(*) from t").fetchone(); c.execute("COMMIT")
    else:
        c.execute("BEGIN IMMEDIATE"); c.execute("insert into t values (1)"); c.execute("COMMIT")
    print("done", flush=True)
"""


def _child(tmp_path, freeze: WriteReleaseFreeze) -> subprocess.Popen:
    db = str(tmp_path / "t.db")
    import sqlite3

    sqlite3.connect(db).execute("create table t(x)").connection.commit()
    env = dict(os.environ, LD_PRELOAD=freeze.library, **freeze.env())
    p = subprocess.Popen([sys.executable, "-c", CHILD, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    assert p.stdout.readline().strip() == "ready"
    return p


def _send(p: subprocess.Popen, line: str) -> None:
    p.stdin.write(line + "\n")
    p.stdin.flush()


def test_an_armed_process_stops_after_its_write_transaction_holding_no_lock(tmp_path):
    freeze = WriteReleaseFreeze(str(tmp_path / "ctl"))
    p = _child(tmp_path, freeze)
    try:
        freeze.arm()
        _send(p, "read")                       # a read transaction takes no write lock: no stop
        assert p.stdout.readline().strip() == "done"
        _send(p, "write")
        assert wait_status(p.pid, psutil.STATUS_STOPPED)
        assert not os.path.exists(freeze.ctl_path)   # the stop claimed the arming
        import sqlite3

        rival = sqlite3.connect(str(tmp_path / "t.db"), timeout=0.5)   # the stopped process holds no lock
        assert rival.execute("select count(*) from t").fetchone() == (1,)
        rival.execute("insert into t values (2)")
        rival.commit()
        rival.close()
        p.send_signal(18)
        assert p.stdout.readline().strip() == "done"
        _send(p, "write")                       # one arming, one stop
        assert p.stdout.readline().strip() == "done"
        assert freeze.disarm() is False
        freeze.arm()
        assert freeze.disarm() is True         # armed, never claimed
    finally:
        p.kill()
        p.wait()


def _slot(tmp_path, spec, t: int, freeze=None) -> Slot:
    def env_for(_t):
        return {"LD_PRELOAD": freeze.library, **freeze.env()} if freeze else {}
    slot = Slot(t, spec, env_for, str(tmp_path / "logs"), queue.Queue(), 10.0, lambda pid: None)
    slot.release_freeze = freeze
    return slot


def _frozen_publish_against(tmp_path, factory: str, after: str) -> tuple[dict, dict]:
    """a's publish frozen (``after`` write-release, or at a seeded time) while b takes a's claim over at
    its expiry: (a's publish completion, b's takeover completion)."""
    spec, w = seeded_sqlite(tmp_path)
    spec = dict(spec, backend="python", factory=factory)
    (tmp_path / "logs").mkdir(exist_ok=True)
    a = _slot(tmp_path, spec, 0, WriteReleaseFreeze(str(tmp_path / "lockfreeze-0")))
    b = _slot(tmp_path, spec, 1)
    b.rendezvous = a.rendezvous   # one run's slots share one (chaos.runner)
    ns, item = w.tuples[0]
    tup = {"ledger_namespace": ns, "item_id": item}
    try:
        got = a.run_op({"process": 0, "f": "acquire", "value": dict(tup, owner_id="a", lease_duration_ms=60_000,
                                                                      expected={"last_epoch": "0", "active": None})})
        claim = got["value"]["envelope"]["result"]["claim"]
        fence = dict(tup, owner_id="a", epoch=claim["epoch"])
        a.run_op({"process": 0, "f": "read", "value": tup})   # a call's latency, for a timed freeze point
        tag = "pub_frozen"
        from backends.contract.values import parse_instant

        takeover = {"process": 1, "f": "acquire", "after_freeze": tag, "ends_freeze": tag,
                    "clock_ms": parse_instant(claim["expires_at"]),
                    "value": dict(tup, owner_id="b", lease_duration_ms=60_000,
                                  expected={"last_epoch": claim["epoch"], "active": claim})}
        rival: dict = {}
        th = threading.Thread(target=lambda: rival.update(b.run_op(takeover)))
        th.start()
        fault = {"kind": "freeze", "at": 0.5, "hold_ms": 50, "tag": tag, **({"after": after} if after else {})}
        pub = a.run_op({"process": 0, "f": "publish", "fault": fault,
                        "value": publish_request(tag, ns, item, revision_of(w.seed_items[(ns, item)]), fence, "a")})
        th.join(30)
        return pub, rival
    finally:
        a.stop()
        b.stop()
        a.kill()
        b.kill()


def test_a_publish_frozen_after_its_fence_transaction_exposes_a_check_then_act_fence(tmp_path):
    pub, rival = _frozen_publish_against(tmp_path, "chaos.testing.mutants:open_fence_outside_commit", "write-release")
    assert pub["fault"]["at"] == "write-release" and pub["fault"]["inside"] is True, pub["fault"]
    assert rival["type"] == "ok"   # b took the item over while a was frozen between its two transactions
    result = pub["value"]["envelope"]["result"]
    assert pub["type"] == "ok" and result["claim_read_back"]["active"]["owner_id"] == "b"   # a stale fence accepted


def test_the_correct_backend_commits_before_the_freeze_and_the_rival_takes_over_after(tmp_path):
    pub, rival = _frozen_publish_against(tmp_path, "backends.sqlite:open_backend", "write-release")
    assert pub["fault"]["inside"] is True and pub["type"] == "ok", pub
    assert pub["value"]["envelope"]["result"]["claim_read_back"]["active"]["owner_id"] == "a"
    assert rival["type"] == "ok"


def test_a_program_without_record_locks_goes_back_to_the_timed_freeze():
    from chaos.worker import ReleaseTally

    committed = ReleaseTally()
    committed.count(landed=False, missed=True, committed=True)   # an ok publish that ended no locked write
    assert not committed.usable()
    refused = ReleaseTally()
    for _ in range(ReleaseTally.MISSES - 1):                       # refused at validation: wrote nothing
        refused.count(landed=False, missed=True, committed=False)
    assert refused.usable()
    refused.count(landed=False, missed=True, committed=False)
    assert not refused.usable()
    landed = ReleaseTally()
    landed.count(landed=True, missed=False, committed=True)
    landed.count(landed=False, missed=True, committed=True)
    assert landed.usable()                                          # it does take record locks


def test_a_rendezvous_is_one_runs_own():
    # a tag is the frozen publish's operation id, the same in a second run of the seed in one process:
    # with one rendezvous per process, that run's rival went ahead at once and its freeze did not wait
    from chaos.faults.incall import InCallFault, Rendezvous

    first, second = Rendezvous(), Rendezvous()
    first.landed("pub_agent-p8_r0e7s2a")
    first.rival_done("pub_agent-p8_r0e7s2a")
    assert first.wait_frozen("pub_agent-p8_r0e7s2a", 0) and first.wait_rival("pub_agent-p8_r0e7s2a", 0)
    assert not second.wait_frozen("pub_agent-p8_r0e7s2a", 0) and not second.wait_rival("pub_agent-p8_r0e7s2a", 0)
    try:
        InCallFault("freeze", 0.0, 10, tag="pub_x")
    except ValueError:
        pass
    else:
        raise AssertionError("a tagged fault without a rendezvous was accepted")


@contextmanager
def _armed_freeze_of_a_child(tmp_path):
    """A real sqlite child under the write-release shim, and a 10-ms in-call freeze armed for its call."""
    from chaos.faults.incall import InCallFault

    freeze = WriteReleaseFreeze(str(tmp_path / "ctl"))
    p = _child(tmp_path, freeze)
    try:
        fault = InCallFault("freeze", 0.0, 10, release=freeze)
        fault.prepare()
        yield p, fault
    finally:
        p.kill()
        p.wait()


def test_a_process_another_fault_stopped_is_not_taken_for_the_freeze(tmp_path):
    # a pause, or a power cut's halt, stops the process while the freeze is armed: the freeze took
    # that stop for its own, said it held the call inside, and resumed a process it had not stopped
    from chaos.faults import procs

    with _armed_freeze_of_a_child(tmp_path) as (p, fault):
        procs.ProcessTree(p.pid).pause()
        assert wait_status(p.pid, psutil.STATUS_STOPPED)
        polls = []

        def answered():   # the call answers after the fault has looked at the stopped process 50 times
            polls.append(1)
            return len(polls) > 50

        fault.start(p.pid, False, answered)
        ev = fault.join(30)
        assert "pid" not in ev and ev["inside"] is False and ev.get("unclaimed") is True, ev
        assert psutil.Process(p.pid).status() == psutil.STATUS_STOPPED   # still the pause's: not resumed


def test_a_freeze_leaves_its_process_stopped_while_a_pause_holds_it(tmp_path):
    # a pause that finds the process stopped at its write release holds it too: the freeze's heal lets go
    # of its own stop only, and the process goes on when the pause resumes it (the old freeze continued it)
    from chaos.faults import procs

    with _armed_freeze_of_a_child(tmp_path) as (p, fault):
        _send(p, "write")
        assert wait_status(p.pid, psutil.STATUS_STOPPED)    # stopped itself at its write release
        pause = procs.ProcessTree(p.pid)
        pause.pause()
        fault.start(p.pid, False, lambda: False)
        ev = fault.join(30)
        assert ev["pid"] == p.pid and ev["inside"] is True and ev["held_ms"] >= 10, ev
        assert psutil.Process(p.pid).status() == psutil.STATUS_STOPPED   # still the pause's
        assert pause.resume() == [p.pid]
        assert p.stdout.readline().strip() == "done"
