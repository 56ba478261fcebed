"""A real commit-time fsync failure (fault-tooling.md 3): the host runs with
the EIO shim preloaded; the failed COMMIT is ambiguous to the store
(``CommitOutcomeUnknown``), so a fresh publish answers exit 6
``publication-outcome-unknown``, a claim rejection answers exit 6
``clock-floor-persistence-failed`` (only the floor was at stake) and a claim
success gives no reply at all (its commit may have happened, so "unchanged"
would be a lie: the op is indeterminate); with the rollback journal nothing
changed, also after a SIGKILL and a reopen."""

from __future__ import annotations

import shutil

import pytest

from chaos.errors import Indeterminate
from chaos.faults.failsync import FsyncFault
from chaos.host import HostClient
from test_sqlite_support import AFTER, BEFORE, ITEM, ITEM2, NS1, T0, acquire_req, new_db, publish_req

def test_fsync_eio_at_commit_is_outcome_unknown_and_changes_nothing(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fsync shim")
    path = new_db(str(tmp_path))
    fault = FsyncFault(str(tmp_path / "failsync.ctl"))
    env = fault.env()
    spec = {"backend": "sqlite", "path": path}
    try:
        _fail_then_recover(spec, env, fault, str(tmp_path / "host.log"))
    finally:
        fault.cleanup()


def _fail_then_recover(spec: dict, env: dict, fault: FsyncFault, log_path: str) -> None:
    with HostClient(spec, env=env, log_path=log_path) as host:
        host.set_clock(T0)
        with open(f"/proc/{host.pid}/maps") as maps:
            assert fault.library in maps.read(), "the fsync shim is not loaded in the host"
        claim = host.call("acquire", acquire_req(NS1, ITEM, "agent-a")).envelope["result"]["claim"]
        before = host.export()
        request = publish_req("pub-eio", NS1, ITEM, claim, BEFORE, AFTER)

        fault.arm()  # every fsync of the host now fails with EIO
        host.set_clock(T0 + 1000)
        reply = host.call("publish", request)
        assert (reply.exit, reply.envelope["state"], reply.envelope["error"]["code"]) == (
            6, "unknown", "publication-outcome-unknown")
        witness_mismatch = dict(acquire_req(NS1, ITEM2, "agent-b"), expected={"last_epoch": "7", "active": None})
        reply = host.call("acquire", witness_mismatch)
        assert (reply.exit, reply.envelope["state"], reply.envelope["error"]["code"]) == (
            6, "unchanged", "clock-floor-persistence-failed")
        with pytest.raises(Indeterminate, match="CommitOutcomeUnknown"):
            host.call("acquire", acquire_req(NS1, ITEM2, "agent-b"))
        host.kill()  # crash while the fault is armed: nothing may come back
        fault.disarm()

    with HostClient(spec, env=env) as host:
        host.set_clock(T0 + 1000)
        assert host.export() == before  # floor, claims, bytes, outcomes: unchanged
        read = host.call("publication-read", {"operation_id": "pub-eio", "ledger_namespace": NS1, "item_id": ITEM})
        assert read.envelope["error"]["code"] == "operation-not-found"
        assert host.call("publish", request).exit == 0  # with the fault healed the same request commits
