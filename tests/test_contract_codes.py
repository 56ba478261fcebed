"""Codes, exits, messages, states, envelopes, digests and capabilities."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from backends.contract.records import Active, BackendConfig, ClaimRecord
from backends.contract import (
    EXIT, MESSAGE, Code, capabilities_reply, claim_error, claim_json, exit_for, is_fenced,
    is_merge_coordinated, message_for, operation_digest, publication_capable, publication_error,
    publication_read_success, read_back, revision, sha256_ref, state_for,
)

NS = "wbns_" + "1" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "work-claims"

EXPECTED = {  # contract §6 and §8 tables, verbatim
    "invalid-request": 2, "candidate-digest-mismatch": 2, "ledger-namespace-unbound": 2,
    "capability-unavailable": 2, "operation-not-found": 2, "ledger-invalid": 3, "claim-conflict": 4,
    "claim-held": 4, "claim-expired": 4, "claim-fence-rejected": 4, "ledger-revision-conflict": 4,
    "idempotency-conflict": 4, "active-claim-write-refused": 4, "claimed-item-write-refused": 4,
    "clock-floor-persistence-failed": 6, "publication-outcome-unknown": 6, "epoch-exhausted": 6,
    "claim-store-unavailable": 6,
}
MESSAGES = {
    "claim-held": "The item has an unexpired active claim.",
    "claim-expired": "The matching claim has expired.",
    "clock-floor-persistence-failed": "The authoritative clock floor could not be persisted.",
    "active-claim-write-refused": "Legacy transition cannot write an item with an active claim.",
    "claimed-item-write-refused": "Legacy create cannot write an item identity with claim history.",
    "epoch-exhausted": "The epoch high-water mark is exhausted.",
    "capability-unavailable": "Claim-protected publication is unavailable on an advisory backend.",
    "operation-not-found": "The publication operation outcome was not found.",
    "idempotency-conflict": "The operation identity is already bound to a different request.",
    "publication-outcome-unknown": "The publication outcome could not be determined.",
    "claim-store-unavailable": "The durable claim store is unavailable.",
    "candidate-digest-mismatch": "The candidate digest does not match the candidate source.",
    "ledger-namespace-unbound": "The ledger namespace is not provisioned for this endpoint.",
    "ledger-invalid": "The candidate ledger is invalid.",
    "claim-fence-rejected": "The supplied claim fence is not the active owner generation.",
    "ledger-revision-conflict": "The durable ledger revision no longer matches this publication.",
}


def test_every_code_has_its_exit():
    assert EXIT == EXPECTED
    assert all(exit_for(code) == ex for code, ex in EXPECTED.items())
    assert {getattr(Code, n) for n in dir(Code) if n.isupper()} == set(EXPECTED)


@pytest.mark.parametrize("code, message", sorted(MESSAGES.items()))
def test_messages_verbatim(code, message):
    assert MESSAGE[code] == message == message_for(code, "whatever")


def test_claim_conflict_has_two_messages():
    assert message_for("claim-conflict", "acquire") == "The observed claim state no longer matches this request."
    for cmd in ("renew", "release"):
        assert message_for("claim-conflict", cmd) == "The active claim tuple no longer matches this request."


def test_states():
    assert state_for("publication-outcome-unknown") == "unknown"
    assert all(state_for(c) == "unchanged" for c in EXPECTED if c != "publication-outcome-unknown")


def test_error_envelope_key_order_and_members():
    reply = claim_error("acquire", Code.CLAIM_HELD, {"x": 1})
    assert list(reply.envelope) == ["ok", "namespace", "command", "contract_version", "state", "error"]
    assert reply.exit == 4 and reply.envelope["contract_version"] == 1
    pub = publication_error(Code.PUBLICATION_OUTCOME_UNKNOWN, {}, operation_id="p")
    assert list(pub.envelope) == ["ok", "namespace", "command", "contract_version", "state", "operation_id",
                                  "error"]
    assert pub.envelope["state"] == "unknown" and pub.exit == 6


def test_read_back_shape():
    rec = ClaimRecord(NS, ITEM, 2**64 - 1, Active("a", 2**64 - 1, 0, 60_000))
    rb = read_back(rec, 1000)
    assert list(rb) == ["ledger_namespace", "item_id", "observed_at", "last_epoch", "active"]
    assert rb["last_epoch"] == "18446744073709551615"
    assert rb["observed_at"] == "1970-01-01T00:00:01.000Z"
    assert rb["active"] == claim_json(rec.active) == {
        "owner_id": "a", "epoch": "18446744073709551615", "issued_at": "1970-01-01T00:00:00.000Z",
        "expires_at": "1970-01-01T00:01:00.000Z"}
    assert read_back(ClaimRecord(NS, ITEM, 0, None), 0)["active"] is None


def test_publication_read_exposes_stored_exit():
    reply = publication_read_success("p", NS, ITEM, "sha256:" + "0" * 64, 4, {"ok": False})
    assert reply.envelope["operation_id"] == "p"
    assert reply.envelope["result"]["outcome"] == {"exit": 4, "stdout": {"ok": False}}


def test_digest_self_test_constants():
    before = (VECTORS / "ledger" / "before.md").read_bytes()
    after = (VECTORS / "ledger" / "after.md").read_bytes()
    assert revision(before) == "sha256:7bd247bb82b1e56f5c0fc30feda8bafd82af72962d78deadd75ee0136d3d1be5"
    assert sha256_ref(after) == "sha256:d8ba5e2458478da0c17d96623d609561bfcf67d607a1b6cd842ae77328691fd8"
    request = {
        "operation_id": "pub_agent_a_1",
        "ledger_namespace": NS,
        "item_id": ITEM,
        "expected_revision": revision(before),
        "candidate_source_base64": base64.b64encode(after).decode(),
        "candidate_sha256": sha256_ref(after),
        "claim_fence": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-a-run-1", "epoch": "9"},
    }
    expected = "sha256:45f66c4c79523c7b83ed5b0c73594c6da708408fde72b16edadf0b8aba45e0cc"
    assert operation_digest(request) == expected
    assert operation_digest(dict(reversed(list(request.items())))) == expected  # key order irrelevant


def _config(**kw) -> BackendConfig:
    return BackendConfig(name="b", namespaces=kw.pop("namespaces", [NS]), **kw)


def test_fenced_requires_every_condition():
    assert is_fenced(_config())
    assert not is_fenced(_config(namespaces=[]))
    assert not is_fenced(_config(coordination_scope="local-filesystem"))
    assert not is_fenced(_config(durability="process-memory"))
    assert not is_fenced(_config(profile="advisory"))
    paths = dict(_config().write_paths)
    for key in list(paths):
        missing = {k: v for k, v in paths.items() if k != key}
        assert not is_fenced(_config(write_paths=missing))
        assert not is_fenced(_config(write_paths=dict(paths, **{key: "bypass"})))
    assert not is_fenced(_config(write_paths=dict(paths, plugin="none")))


def test_capabilities_reply_fenced_and_advisory():
    fenced = capabilities_reply(_config())
    assert fenced.exit == 0 and "state" not in fenced.envelope
    wc = fenced.envelope["result"]["operations"]["work_claim"]
    assert (wc["mode"], wc["claim_protected_publication"], wc["fencing_enforced_at"],
            wc["safe_exclusive_dispatch"]) == ("fenced", True, "ledger-publication-commit-boundary", True)
    advisory = capabilities_reply(_config(write_paths={"alternate": "bypass"}))
    wc = advisory.envelope["result"]["operations"]["work_claim"]
    assert (wc["mode"], wc["claim_protected_publication"], wc["fencing_enforced_at"],
            wc["safe_exclusive_dispatch"]) == ("advisory", False, "none", False)
    assert wc["write_paths"] == {"alternate": "bypass"}  # echoed as configured
    assert "durability" not in advisory.envelope["result"]["backend"]


def test_capabilities_merge_coordinated_profile():
    cfg = _config(profile="merge-coordinated")
    assert is_merge_coordinated(cfg) and publication_capable(cfg) and not is_fenced(cfg)
    result = capabilities_reply(cfg).envelope["result"]
    assert result["backend"]["coordination_scope"] == "shared-git-common-dir-serialized-journal"
    wc = result["operations"]["work_claim"]
    assert (wc["mode"], wc["fencing_enforced_at"], wc["safe_exclusive_dispatch"]) == (
        "merge-coordinated", "git-history-reconciliation", False)
    assert not publication_capable(_config(profile="advisory"))
    assert not publication_capable(_config(profile="merge-coordinated", namespaces=[]))
