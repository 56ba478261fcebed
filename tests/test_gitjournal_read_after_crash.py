"""The lost-reply recovery of contract §6 after a real kill -9 of the
Git-journal CLI inside ``publish-claimed``, with NO ``claim-verify`` in
between: the caller reads the operation's outcome, then retries the identical
request, which must return the stored envelope without a second write.

Found by the power-loss nemesis: a crash after the item's rename but before
the ``publish-final`` entry left a pending intent whose bytes were in place,
and the read paths did not reconcile it, so ``publication-read`` answered
``operation-not-found`` and the retry ``ledger-revision-conflict``. Both read
paths now settle the pending intents they would answer from under the
namespace lock (``GitJournalStore.settle``)."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "gitjournal_crash", Path(__file__).resolve().parents[1] / "benchmarks" / "gitjournal_crash.py")
crash = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash)


def _killed_publish(rig, op_id: str, point: str) -> tuple[dict, bytes, bytes]:
    old = rig.item()
    new = rig.sources[1] if old == rig.sources[0] else rig.sources[0]
    req = rig.request(op_id, old, new)
    env = dict(os.environ, CLAIM_CHAOS_GITJOURNAL_CRASH_AT=point)
    res = subprocess.run(crash.CLI + ["publish-claimed", "--ledger", rig.ledger_dir, "--input", "-", "--json"],
                         input=json.dumps(req).encode(), capture_output=True, cwd=crash.ROOT, env=env, timeout=60)
    assert res.returncode < 0 and res.stdout == b""     # killed: the reply is lost
    return req, old, new


def _journal(rig) -> list[dict]:
    path = rig.backend().store.ledger.journal
    return [json.loads(line) for line in Path(path).read_bytes().splitlines()]


def _read(rig, op_id: str):
    return rig.backend().call("publication-read", {"operation_id": op_id, "ledger_namespace": rig.ns,
                                                   "item_id": crash.ITEM})


@pytest.fixture()
def rig(tmp_path):
    return crash.Rig(str(tmp_path))


def test_a_publication_killed_after_its_rename_is_read_as_committed_and_its_retry_replays(rig):
    req, _old, new = _killed_publish(rig, "crash-read", "after-item-rename")
    assert rig.item() == new                            # the bytes are in place, no final entry yet
    read = _read(rig, "crash-read")
    assert read.exit == 0, read.envelope                # not operation-not-found: it happened
    outcome = read.envelope["result"]["outcome"]
    assert outcome["exit"] == 0 and outcome["stdout"]["result"]["committed_revision"] == req["candidate_sha256"]
    retry = rig.backend().call("publish", req)
    assert (retry.exit, retry.envelope) == (0, outcome["stdout"])   # the stored envelope, verbatim
    entries = [e for e in _journal(rig) if e.get("op") == "crash-read"]
    assert [e["t"] for e in entries] == ["publish-intent", "publish-final"]   # no second write
    assert rig.item() == new
    verify = rig.backend().call("verify", b"")
    assert verify.exit == 0 and verify.envelope["result"]["findings"] == [], verify.envelope


def test_the_identical_retry_alone_replays_a_publication_killed_after_its_rename(rig):
    req, _old, new = _killed_publish(rig, "crash-retry", "after-item-rename")
    retry = rig.backend().call("publish", req)
    assert retry.exit == 0 and retry.envelope["result"]["committed_revision"] == req["candidate_sha256"], \
        retry.envelope
    assert [e["t"] for e in _journal(rig) if e.get("op") == "crash-retry"] == ["publish-intent", "publish-final"]
    assert rig.item() == new


def test_a_publication_killed_before_its_item_write_is_not_found_and_its_retry_publishes(rig):
    req, old, new = _killed_publish(rig, "crash-before", "after-intent")
    assert rig.item() == old
    read = _read(rig, "crash-before")
    assert (read.exit, read.envelope["error"]["code"]) == (2, "operation-not-found")
    retry = rig.backend().call("publish", req)
    assert retry.exit == 0, retry.envelope
    assert rig.item() == new
    kinds = [e["t"] for e in _journal(rig) if e.get("op") == "crash-before"]
    assert kinds == ["publish-intent", "publish-not-applied", "publish-intent", "publish-final"]


def test_a_pending_intent_whose_bytes_are_neither_side_reads_as_unknown_not_as_not_found(rig):
    req, _old, new = _killed_publish(rig, "crash-other", "after-item-rename")
    other = new.replace(b"\n", b"\n\n", 1)              # someone changed the item outside the journal
    Path(rig.ledger_dir, f"{crash.ITEM}.md").write_bytes(other)
    read = _read(rig, "crash-other")
    assert read.exit == 6 and read.envelope["state"] == "unknown", read.envelope
    assert read.envelope["error"]["code"] == "publication-outcome-unknown"
    assert read.envelope["error"]["details"] == {"operation_id": "crash-other", "ledger_namespace": rig.ns,
                                                 "item_id": crash.ITEM}
    assert base64.b64decode(req["candidate_source_base64"]) == new


def test_a_read_that_commits_a_dead_writers_intent_makes_its_rename_durable_first(tmp_path):
    """The dead writer was killed before it synced the ledger directory, so its
    rename is not durable; the reader that appends the ``publish-final`` must
    sync it first, or a power loss brings the old bytes back under a stored
    success. Both processes run under the power-loss shim, then the power goes."""
    from chaos.faults.powerloss import PowerLoss

    rig = crash.Rig(str(tmp_path / "rig"))
    pl = PowerLoss(str(tmp_path / "pl"), rig.repo + os.sep)
    try:
        old = rig.item()
        new = rig.sources[1]
        req = rig.request("crash-power", old, new)
        env = {**os.environ, **pl.env(), "CLAIM_CHAOS_GITJOURNAL_CRASH_AT": "after-item-rename"}
        res = subprocess.run(crash.CLI + ["publish-claimed", "--ledger", rig.ledger_dir, "--input", "-"],
                             input=json.dumps(req).encode(), capture_output=True, cwd=crash.ROOT, env=env, timeout=60)
        assert res.returncode < 0 and rig.item() == new
        query = {"operation_id": "crash-power", "ledger_namespace": rig.ns, "item_id": crash.ITEM}
        env = {**os.environ, **pl.env()}
        res = subprocess.run(crash.CLI + ["claim", "verify", "--ledger", rig.ledger_dir, "--input", "-"],
                             input=json.dumps(query).encode(), capture_output=True, cwd=crash.ROOT, env=env,
                             timeout=60)
        assert res.returncode == 0, res.stdout          # the reader answered "committed" ...
        assert pl.journaled() > 0                       # (the shim saw the writes)
        pl.power_off("drop")
    finally:
        pl.cleanup()
    assert rig.item() == new                            # ... so the bytes survive the power loss
    read = _read(rig, "crash-power")
    assert read.exit == 0 and read.envelope["result"]["outcome"]["exit"] == 0
