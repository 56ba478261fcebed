"""Configuration cases (vectors.md 11.9, tag CFG): the capability the SQLite
backend reports is derived from what the file really has."""

from __future__ import annotations

import base64

import pytest

from backends.sqlite import admin
from test_sqlite_support import (  # noqa: F401
    AFTER, BEFORE, ITEM, NS1, acquire_req, db, item_bytes, open_sqlite, publish_req,
)


def _work_claim(backend) -> dict:
    reply = backend.call("capabilities", {})
    assert reply.exit == 0
    return reply.envelope["result"]["operations"]["work_claim"]


def test_provisioned_file_reports_fenced_with_its_allowlist(db):
    backend = open_sqlite(db)
    assert _work_claim(backend)["mode"] == "fenced"
    assert _work_claim(backend)["safe_exclusive_dispatch"] is True
    assert backend.call("capabilities", {}).envelope["result"]["backend"]["name"] == "sqlite-strict-fenced"


def test_bypass_writer_is_refused_until_declared_then_really_writes_unfenced(db):
    with pytest.raises(admin.BypassNotDeclared):
        admin.direct_write(db, NS1, ITEM, b"x")
    backend = open_sqlite(db)
    claim = backend.call("acquire", acquire_req(NS1, ITEM, "agent-a")).envelope["result"]["claim"]

    admin.enable_bypass_writer(db)
    backend.restart()  # a running backend re-reads provisioning on restart
    fresh = open_sqlite(db)
    for b in (backend, fresh):
        caps = _work_claim(b)
        assert (caps["mode"], caps["safe_exclusive_dispatch"], caps["write_paths"]["alternate"]) == (
            "advisory", False, "bypass")
    # the bypass writes under a live claim held by someone else: no fence, no floor
    floors_before = fresh.store.export_durable()["clock_floors"]
    admin.direct_write(db, NS1, ITEM, item_bytes(ITEM, AFTER))
    durable = fresh.store.export_durable()
    assert durable["clock_floors"] == floors_before
    written = [led["source_base64"] for led in durable["ledgers"] if (led["ledger_namespace"], led["item_id"]) == (NS1, ITEM)]
    assert written == [base64.b64encode(item_bytes(ITEM, AFTER)).decode()]
    # and publish-claimed is refused on the advisory endpoint
    reply = fresh.call("publish", publish_req("op-adv", NS1, ITEM, claim, AFTER, BEFORE))
    assert (reply.exit, reply.envelope["error"]["code"]) == (2, "capability-unavailable")


def test_missing_write_path_is_advisory_but_the_entry_point_still_serves(tmp_path):
    path = str(tmp_path / "c.db")
    paths = {"alternate": "none", "claimed_publication_v1": "atomic-fence", "legacy_create_v1": "reject-claimed-id"}
    admin.provision(path, [NS1], write_paths=paths)
    backend = open_sqlite(path)
    caps = _work_claim(backend)
    assert caps["mode"] == "advisory" and caps["write_paths"] == paths
    backend.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
    reply = backend.call("legacy-transition", {"ledger_namespace": NS1, "item_id": ITEM})
    assert (reply.exit, reply.envelope["error"]["code"]) == (4, "active-claim-write-refused")


def test_spec_contradicting_the_file_is_refused(db):
    from backends.sqlite import SpecMismatch, config_for

    with pytest.raises(SpecMismatch):
        config_for({"path": db, "namespaces": [NS1]})
