"""The host (worker) process protocol against a real SQLite-backed host:
barrier, lost reply, exit after commit, restart, SIGKILL, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from chaos.errors import Indeterminate
from chaos.host import HostClient
from test_sqlite_support import (
    AFTER, BEFORE, ITEM, ITEM2, NS1, T0, acquire_req, item_bytes, new_db, publish_req, release_req,
)

READ = {"ledger_namespace": NS1, "item_id": ITEM}


@pytest.fixture
def host(tmp_path):
    path = new_db(str(tmp_path))
    client = HostClient({"backend": "sqlite", "path": path}, log_path=str(tmp_path / "host.log"))
    client.set_clock(T0)
    yield client
    client.kill()
    assert not psutil.pid_exists(client.pid)


def _claim(reply) -> dict:
    assert reply.exit == 0, reply.envelope
    return reply.envelope["result"]["claim"]


def test_parked_writer_holds_no_lock_and_is_fenced_out_after_takeover(host):
    a = _claim(host.call("acquire", acquire_req(NS1, ITEM, "agent-a", lease_ms=1000)))
    host.arm_barrier("pub-a")
    parked = host.call_async("publish", publish_req("pub-a", NS1, ITEM, a, BEFORE, AFTER))
    assert host.wait_barrier("pub-a", timeout=10)
    assert not parked.done()
    host.set_clock(T0 + 1000)  # A's lease expired; B takes over while A is parked
    b = _claim(host.call("acquire", acquire_req(NS1, ITEM, "agent-b", last_epoch=1, active=a)))
    assert b["epoch"] == "2"
    host.release_barrier("pub-a")
    reply = parked.result(timeout=10)
    assert (reply.exit, reply.envelope["error"]["code"], reply.envelope["error"]["details"]["reason"]) == (
        4, "claim-fence-rejected", "owner-mismatch")
    durable = host.export()
    assert [o["operation_id"] for o in durable["publication_outcomes"]] == ["pub-a"]  # a stored rejection
    assert host.call("publish", publish_req("pub-b", NS1, ITEM, b, BEFORE, AFTER)).exit == 0


def test_lost_claim_reply_is_committed_and_replay_does_not_consume_publish_loss(host):
    host.lose_next_reply("claim")
    with pytest.raises(Indeterminate, match="reply lost"):
        host.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
    read_back = host.call("read", READ).envelope["result"]["read_back"]
    assert read_back["last_epoch"] == "1" and read_back["active"]["owner_id"] == "agent-a"
    claim = read_back["active"]

    request = publish_req("pub-1", NS1, ITEM, claim, BEFORE, AFTER)
    assert host.call("publish", request).exit == 0
    host.lose_next_reply("publish")
    assert host.call("publish", request).exit == 0  # a replay: no commit, the fault stays armed
    other = publish_req("pub-2", NS1, ITEM, claim, AFTER, BEFORE)
    with pytest.raises(Indeterminate, match="reply lost"):
        host.call("publish", other)
    assert [o["operation_id"] for o in host.export()["publication_outcomes"]] == ["pub-1", "pub-2"]


def test_exit_after_commit_kills_the_host_and_the_commit_is_durable(tmp_path):
    path = new_db(str(tmp_path))
    spec = {"backend": "sqlite", "path": path}
    with HostClient(spec) as first:
        first.set_clock(T0)
        first.exit_after_commit("claim")
        with pytest.raises(Indeterminate):
            first.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
        assert first.proc.wait(timeout=10) == 137
        assert not first.alive
    with HostClient(spec) as second:
        second.set_clock(T0)
        assert second.call("read", READ).envelope["result"]["read_back"]["last_epoch"] == "1"


def test_restart_keeps_durable_state_and_abandons_a_parked_call(host):
    claim = _claim(host.call("acquire", acquire_req(NS1, ITEM2, "agent-a")))
    before = host.export()
    host.arm_barrier("pub-x")
    parked = host.call_async("publish", publish_req("pub-x", NS1, ITEM2, claim, item_bytes(ITEM2, BEFORE),
                                                    item_bytes(ITEM2, AFTER)))
    assert host.wait_barrier("pub-x", timeout=10)
    host.restart()
    with pytest.raises(Indeterminate):
        parked.result(timeout=10)
    assert host.export() == before  # the abandoned writer never committed
    host.set_clock(T0 - 3_600_000)  # clock stepped back: time comes from the durable floor
    rb = host.call("read", {"ledger_namespace": NS1, "item_id": ITEM2}).envelope["result"]["read_back"]
    assert rb["active"] == claim and rb["observed_at"] == "2030-01-11T09:00:00.000Z"


def test_sigkill_leaves_no_process_and_pending_calls_become_indeterminate(host):
    host.arm_barrier("pub-k")
    claim = _claim(host.call("acquire", acquire_req(NS1, ITEM, "agent-a")))
    parked = host.call_async("publish", publish_req("pub-k", NS1, ITEM, claim, BEFORE, AFTER))
    assert host.wait_barrier("pub-k", timeout=10)
    pid = host.pid
    assert host.kill() == -9
    assert not psutil.pid_exists(pid)
    with pytest.raises(Indeterminate):
        parked.result(timeout=10)
    with pytest.raises(Indeterminate):
        host.call("read", READ, timeout=5)


def test_graceful_close_and_raw_bytes_requests(tmp_path):
    path = new_db(str(tmp_path))
    client = HostClient({"backend": "sqlite", "path": path})
    dup = b'{"ledger_namespace":"%s","ledger_namespace":"%s","item_id":"%s"}' % (NS1.encode(), NS1.encode(), ITEM.encode())
    reply = client.call("read", dup)
    assert reply.exit == 2 and reply.envelope["error"]["code"] == "invalid-request"
    assert client.close() == 0


def test_bad_spec_is_a_one_line_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "chaos.host", "--spec-json", json.dumps({"backend": "nope"})],
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 254
    assert len(proc.stderr.decode().strip().splitlines()) == 1
    assert proc.stdout == b""


def test_host_that_cannot_start_is_a_setup_failure_and_leaves_nothing(tmp_path):
    from chaos.errors import SetupFailed
    from chaos.faults import procs

    before = procs.registered()
    with pytest.raises(SetupFailed, match="did not become ready"):
        HostClient({"backend": "sqlite"})  # no path
    assert procs.registered() == before


def test_clock_file_spec_shares_the_clock_through_the_file(tmp_path):
    path = new_db(str(tmp_path))
    clock_file = tmp_path / "clock"
    with HostClient({"backend": "sqlite", "path": path, "clock_file": str(clock_file)}) as host:
        host.set_clock(T0 + 42)
        assert clock_file.read_text() == str(T0 + 42)
        assert host.call("read", READ).envelope["result"]["read_back"]["observed_at"] == "2030-01-11T09:00:00.042Z"
