"""The Git-journal backend on real git repositories: journal location, lock
ownership and recovery, publish ordering, claim-verify findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backends.api import FixedClock, Hooks
from backends.gitjournal import lock as gl
from backends.gitjournal import open_backend, provision
from backends.gitjournal.journal import replay

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from gitjournal_crash import ITEM, Rig  # noqa: E402


@pytest.fixture()
def rig(tmp_path):
    return Rig(str(tmp_path))


def test_journal_lives_in_the_git_common_dir_shared_by_worktrees(rig):
    wt = os.path.join(rig.base, "wt2")
    subprocess.run(["git", "-C", rig.repo, "worktree", "add", "-q", wt], check=True)
    other = open_backend({"ledger": os.path.join(wt, "ledger")}, FixedClock(None), Hooks())
    assert other.store.ledger.namespace == rig.ns  # the namespace file was committed
    assert other.store.ledger.journal == rig.backend().store.ledger.journal
    assert rig.backend().store.ledger.journal.startswith(os.path.join(rig.repo, ".git", "claim-chaos"))
    read = other.call("read", {"ledger_namespace": rig.ns, "item_id": ITEM})
    assert read.envelope["result"]["read_back"]["last_epoch"] == "1"  # the acquire made in worktree 1


def test_provision_is_exclusive_and_committed(rig):
    with pytest.raises(Exception, match="already provisioned"):
        provision(rig.ledger_dir)
    log = subprocess.run(["git", "-C", rig.repo, "log", "--format=%s", "--", "ledger/.claim-namespace"],
                         capture_output=True, text=True).stdout
    assert "provision ledger namespace" in log


def _write_lock(rig, owner: dict | bytes) -> str:
    path = os.path.join(rig.backend().store.ledger.ns_dir, "lock")
    with open(path, "wb") as f:
        f.write(owner if isinstance(owner, bytes) else json.dumps(owner).encode())
    return path


def _acquire_other(rig, lock_wait_ms: int = 100):
    b = open_backend({"ledger": rig.ledger_dir, "lock_wait_ms": lock_wait_ms}, FixedClock(None), Hooks())
    return b.call("acquire", {"ledger_namespace": rig.ns, "item_id": "wb_01Q4837BM01W70T30B184GG1R9",
                              "owner_id": "x", "lease_duration_ms": 1000, "expected": {"last_epoch": "0", "active": None}})


def test_live_owner_lock_is_never_recovered(rig):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = _write_lock(rig, {"pid": live.pid, "start_time": gl.process_start_time(live.pid), "token": "t1"})
        reply = _acquire_other(rig)
        assert reply.exit == 6
        assert reply.envelope["error"] == {"code": "claim-store-unavailable",
                                           "message": "The durable claim store is unavailable.",
                                           "details": {"reason": "claim-store-locked"}}
        assert os.path.exists(path)
    finally:
        live.kill()
        live.wait()
    assert _acquire_other(rig).exit == 0  # now the OS reports the owner gone: recovered


def test_a_live_owners_lock_is_not_taken_when_the_wall_clock_moves_its_psutil_start(rig, monkeypatch):
    """psutil's create_time() adds a boot time derived from the wall clock (``/proc/stat`` btime, re-read
    on every call): a clock stepped or slewed across a second moves it by one, and a live owner read as
    a reused pid lost its lock (a deterministic soak run: a frozen publisher's lock recovered, two
    commits on one revision). The kernel's start ticks do not move."""
    import psutil._pslinux as pslinux

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = {"pid": live.pid, "start_ticks": gl.process_start_ticks(live.pid),
                  "start_time": gl.process_start_time(live.pid), "token": "t1"}
        path = _write_lock(rig, record)
        real = pslinux.boot_time
        monkeypatch.setattr(pslinux, "boot_time", lambda: real() + 1.0)   # the wall clock stepped a second
        assert gl.process_start_time(live.pid) == record["start_time"] + 1.0   # what the old check compared
        assert not gl.owner_absent(record)
        assert _acquire_other(rig).exit == 6 and os.path.exists(path)
    finally:
        live.kill()
        live.wait()
    assert _acquire_other(rig).exit == 0   # gone: recovered


def test_pid_reuse_is_detected_by_start_ticks(rig):
    me = os.getpid()  # a live pid, but not the process that took the lock
    _write_lock(rig, {"pid": me, "start_ticks": gl.process_start_ticks(me) - 100, "start_time": 0.0, "token": "t3"})
    assert _acquire_other(rig).exit == 0


def test_malformed_lock_stays_unavailable(rig):
    _write_lock(rig, b"{not json")
    assert _acquire_other(rig).envelope["error"]["details"]["reason"] == "claim-store-locked"


def test_pid_reuse_is_detected_by_start_time(rig):
    me = os.getpid()  # a live pid, but not the process that took the lock
    _write_lock(rig, {"pid": me, "start_time": gl.process_start_time(me) - 1000.0, "token": "t2"})
    assert _acquire_other(rig).exit == 0


def test_publish_appends_intent_before_final_and_verify_finalizes_once(rig):
    b = rig.backend()
    req = rig.request("op-1", rig.sources[0], rig.sources[1])
    assert b.call("publish", req).exit == 0
    kinds = [json.loads(line)["t"] for line in open(b.store.ledger.journal)]
    assert kinds[-2:] == ["publish-intent", "publish-final"]
    first = b.call("verify", b"")
    assert first.exit == 0 and first.envelope["result"]["publications"][0]["git_finalized"] is False
    subprocess.run(["git", "-C", rig.repo, "commit", "-qam", "publish"], check=True)
    for _ in range(2):
        again = b.call("verify", b"")
        pub = again.envelope["result"]["publications"][0]
        assert pub["git_finalized"] is True and len(pub["git_commit"]) >= 40
    state = replay(b.store.ledger.journal, rig.ns)
    assert len(state.finalized) == 1
    assert sum(1 for line in open(b.store.ledger.journal) if '"publish-finalization"' in line) == 1


def test_verify_reports_a_stale_write(rig):
    b = rig.backend()
    assert b.call("publish", rig.request("op-1", rig.sources[0], rig.sources[1])).exit == 0
    with open(os.path.join(rig.ledger_dir, f"{ITEM}.md"), "ab") as f:
        f.write(b"\nedited behind the journal's back\n")
    reply = b.call("verify", b"")
    assert reply.exit == 6 and reply.envelope["state"] == "unknown"
    assert [f["finding"] for f in reply.envelope["error"]["details"]["findings"]] == ["stale-write-detected"]


def test_verify_reports_a_revision_regression(rig):
    b = rig.backend()
    before, after = rig.sources
    assert b.call("publish", rig.request("op-1", before, after)).exit == 0
    assert b.call("publish", rig.request("op-2", after, before)).exit == 0
    with open(os.path.join(rig.ledger_dir, f"{ITEM}.md"), "wb") as f:
        f.write(after)  # back to op-1's revision, older than op-2's
    reply = b.call("verify", b"")
    assert reply.exit == 6
    assert [f["finding"] for f in reply.envelope["error"]["details"]["findings"]] == ["revision-regression"]


def test_unprovisioned_git_ledger_is_advisory_and_refuses_before_reading(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    b = open_backend({"ledger": str(tmp_path)}, FixedClock(None), Hooks())
    work = b.call("capabilities", {}).envelope["result"]["operations"]["work_claim"]
    assert (work["mode"], work["claim_protected_publication"], work["safe_exclusive_dispatch"]) == ("advisory", False, False)
    reply = b.call("publish", b"not even json")
    assert reply.exit == 2 and "operation_id" not in reply.envelope
    assert reply.envelope["error"]["details"] == {"reason": "advisory-capability"}
