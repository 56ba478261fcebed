"""The claim model on small hand-written histories: valid, stale write, dual ownership, info-heavy."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from checkers.linearizable import check
from backends.contract.digests import operation_digest as digest

NS, ITEM = "wbns_11111111111111111111111111111111", "wb_01Q4837BM01W70T30B184GG1R6"
BASE = datetime(2030, 1, 11, 9, 0, tzinfo=timezone.utc)
REV0, REV1, REV2 = ("sha256:" + c * 64 for c in "abc")


def instant(ms: int) -> str:
    return (BASE + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def active(owner: str, epoch: int, issued: int, expires: int) -> dict:
    return {"owner_id": owner, "epoch": str(epoch), "issued_at": instant(issued), "expires_at": instant(expires)}


def rb(le: int, act: dict | None, t: int) -> dict:
    return {"ledger_namespace": NS, "item_id": ITEM, "observed_at": instant(t), "last_epoch": str(le), "active": act}


def claim_ok(command: str, result: dict) -> tuple[int, dict]:
    return 0, {"ok": True, "namespace": "work-claim", "command": command, "contract_version": 1,
               "state": "committed", "result": result}


def claim_err(command: str, code: str, details: dict) -> tuple[int, dict]:
    return 4, {"ok": False, "namespace": "work-claim", "command": command, "contract_version": 1,
               "state": "unchanged", "error": {"code": code, "message": "...", "details": details}}


def fence(owner: str, epoch: int) -> dict:
    return {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner, "epoch": str(epoch)}


def publish_req(op_id: str, owner: str, epoch: int, expected: str, candidate: str) -> dict:
    return {"operation_id": op_id, "ledger_namespace": NS, "item_id": ITEM, "expected_revision": expected,
            "candidate_source_base64": "eA==", "candidate_sha256": candidate, "claim_fence": fence(owner, epoch)}


def publish_ok(req: dict, le: int, act: dict, t: int) -> tuple[int, dict]:
    return 0, {"ok": True, "namespace": "ledger-publication", "command": "publish-claimed", "contract_version": 1,
               "state": "committed", "operation_id": req["operation_id"],
               "result": {"ledger_namespace": NS, "item_id": ITEM, "committed_revision": req["candidate_sha256"],
                          "claim_fence": req["claim_fence"], "claim_read_back": rb(le, act, t)}}


def publish_err(req: dict, code: str, details: dict) -> tuple[int, dict]:
    return 4, {"ok": False, "namespace": "ledger-publication", "command": "publish-claimed", "contract_version": 1,
               "state": "unchanged", "operation_id": req["operation_id"],
               "error": {"code": code, "message": "...", "details": details}}


class H:
    """A history builder: ``invoke`` / ``ok`` / ``fail`` / ``info`` append lines with increasing time."""

    def __init__(self) -> None:
        self.ops: list[dict] = []

    def _add(self, **op) -> None:
        self.ops.append(dict(op, index=len(self.ops), time=len(self.ops) * 1000))

    def invoke(self, p: int, f: str, req: dict) -> "H":
        self._add(process=p, type="invoke", f=f, value=req)
        return self

    def done(self, p: int, f: str, reply: tuple[int, dict], kind: str | None = None) -> "H":
        exit_code, env = reply
        kind = kind or ("ok" if exit_code == 0 else "fail")
        self._add(process=p, type=kind, f=f, value={"exit": exit_code, "envelope": env})
        return self

    def info(self, p: int, f: str, error: str = "timeout") -> "H":
        self._add(process=p, type="info", f=f, value=None, error=error)
        return self

    def check(self) -> dict:
        return check(self.ops, {"timeout": 10})


TUPLE = {"ledger_namespace": NS, "item_id": ITEM}


def acquire_req(owner: str, le: int, act: dict | None, lease: int = 1000) -> dict:
    return {**TUPLE, "owner_id": owner, "lease_duration_ms": lease, "expected": {"last_epoch": str(le), "active": act}}


def renew_req(owner: str, epoch: int, expires: int, lease: int = 1000) -> dict:
    return {**TUPLE, "owner_id": owner, "epoch": str(epoch), "expected_expires_at": instant(expires),
            "lease_duration_ms": lease}


def release_req(owner: str, epoch: int, expires: int) -> dict:
    return {**TUPLE, "owner_id": owner, "epoch": str(epoch), "expected_expires_at": instant(expires)}


A1 = active("a", 1, 100, 1100)


def test_valid_concurrent_history() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.invoke(2, "acquire", acquire_req("b", 0, None))
    # b's conflict is decided after a's acquire even though b's reply arrives first
    h.done(2, "acquire", claim_err("acquire", "claim-conflict", rb(1, A1, 150)))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    h.invoke(2, "read", TUPLE).done(2, "read", claim_ok("read", {"read_back": rb(1, A1, 160)}))
    renewed = active("a", 1, 100, 1200)
    h.invoke(1, "renew", renew_req("a", 1, 1100)).invoke(2, "read", TUPLE)
    h.done(2, "read", claim_ok("read", {"read_back": rb(1, A1, 190)}))  # before the renew took effect
    h.done(1, "renew", claim_ok("renew", {"claim": renewed, "read_back": rb(1, renewed, 200)}))
    req = publish_req("pub_a_1", "a", 1, REV0, REV1)
    h.invoke(1, "publish", req).done(1, "publish", publish_ok(req, 1, renewed, 300))
    stale = publish_req("pub_b_1", "b", 1, REV0, REV2)
    h.invoke(2, "publish", stale).done(2, "publish", publish_err(stale, "claim-fence-rejected", {
        **TUPLE, "observed_at": instant(310), "reason": "owner-mismatch", "supplied_owner_id": "b",
        "supplied_epoch": "1", "active_owner_id": "a", "active_epoch": "1"}))
    h.invoke(1, "release", release_req("a", 1, 1200))
    h.done(1, "release", claim_ok("release", {"released_claim": renewed, "read_back": rb(1, None, 400)}))
    # takeover by b of the released tuple allocates epoch 2
    b2 = active("b", 2, 2000, 3000)
    h.invoke(2, "acquire", acquire_req("b", 1, None))
    h.done(2, "acquire", claim_ok("acquire", {"claim": b2, "read_back": rb(2, b2, 2000)}))
    res = h.check()
    assert res["valid"] is True, res


def test_stale_write_after_takeover_is_illegal() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    b2 = active("b", 2, 1500, 2500)
    h.invoke(2, "acquire", acquire_req("b", 1, A1))
    h.done(2, "acquire", claim_ok("acquire", {"claim": b2, "read_back": rb(2, b2, 1500)}))
    req = publish_req("pub_a_1", "a", 1, REV0, REV1)  # a was paused; its fence is epoch 1
    h.invoke(1, "publish", req).done(1, "publish", publish_ok(req, 2, b2, 1600))
    res = h.check()
    assert res["valid"] is False
    anomaly = res["anomalies"][0]
    assert anomaly["type"] == "nonlinearizable" and anomaly["data"]["item_id"] == ITEM
    assert 4 in anomaly["data"]["not_linearizable_after_it"]  # the publish invoke


def test_publish_after_expiry_is_illegal() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    req = publish_req("pub_a_1", "a", 1, REV0, REV1)
    h.invoke(1, "publish", req).done(1, "publish", publish_ok(req, 1, A1, 1100))  # equality is expired
    assert h.check()["valid"] is False


def test_dual_ownership_is_illegal() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    b2 = active("b", 2, 500, 1500)  # takeover while a's lease runs to 1100
    h.invoke(2, "acquire", acquire_req("b", 1, A1))
    h.done(2, "acquire", claim_ok("acquire", {"claim": b2, "read_back": rb(2, b2, 500)}))
    assert h.check()["valid"] is False


def test_same_epoch_twice_is_illegal() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None)).invoke(2, "acquire", acquire_req("b", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    b1 = active("b", 1, 120, 1120)
    h.done(2, "acquire", claim_ok("acquire", {"claim": b1, "read_back": rb(1, b1, 120)}))
    assert h.check()["valid"] is False


def test_decision_time_going_back_is_illegal() -> None:
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    late = active("a", 1, 100, 1050)  # renewed at 50 < the acquire's 100: the floor went back
    h.invoke(1, "renew", renew_req("a", 1, 1100))
    h.done(1, "renew", claim_ok("renew", {"claim": late, "read_back": rb(1, late, 50)}))
    assert h.check()["valid"] is False


def test_info_heavy_history_is_valid() -> None:
    h = H()
    # a's acquire is lost: the reply never came, but it did take effect (b sees it)
    h.invoke(1, "acquire", acquire_req("a", 0, None)).info(1, "acquire")
    h.invoke(2, "read", TUPLE).done(2, "read", claim_ok("read", {"read_back": rb(1, A1, 200)}))
    # an uncertain exit 6 on c's acquire: recorded info, had no effect
    h.invoke(3, "acquire", acquire_req("c", 0, None))
    h.done(3, "acquire", (6, {"ok": False, "state": "unchanged", "error": {"code": "clock-floor-persistence-failed"}}),
           kind="info")
    h.invoke(2, "acquire", acquire_req("b", 1, A1))
    h.done(2, "acquire", claim_err("acquire", "claim-held", rb(1, A1, 300)))
    b2 = active("b", 2, 1200, 2200)
    h.invoke(2, "acquire", acquire_req("b", 1, A1))
    h.done(2, "acquire", claim_ok("acquire", {"claim": b2, "read_back": rb(2, b2, 1200)}))
    # b's publish commits but the reply is lost; the read-back finds the stored success
    req = publish_req("pub_b_1", "b", 2, REV0, REV1)
    h.invoke(2, "publish", req).info(2, "publish", "lost reply")
    stored = publish_ok(req, 2, b2, 1300)
    h.invoke(4, "publication-read", {"operation_id": "pub_b_1", **TUPLE})
    h.done(4, "publication-read", (0, {"ok": True, "result": {
        "operation_id": "pub_b_1", **TUPLE, "operation_digest": digest(req),
        "outcome": {"exit": 0, "stdout": stored[1]}}}))
    # the identical retry returns the stored envelope verbatim, old observed_at and all
    h.invoke(4, "publish", req).done(4, "publish", stored)
    # another publish by the same owner whose outcome is never learned
    req2 = publish_req("pub_b_2", "b", 2, REV1, REV2)
    h.invoke(4, "publish", req2).info(4, "publish")
    # a release whose reply is lost, then a read that sees it released
    h.invoke(5, "release", release_req("b", 2, 2200)).info(5, "release")
    h.invoke(6, "read", TUPLE).done(6, "read", claim_ok("read", {"read_back": rb(2, None, 1500)}))
    h.invoke(7, "acquire", acquire_req("d", 0, None))  # still open at the end
    res = h.check()
    assert res["valid"] is True, res


def test_replay_must_be_verbatim_and_ids_are_bound_to_requests() -> None:
    def base() -> tuple[H, dict, tuple]:
        h = H()
        h.invoke(1, "acquire", acquire_req("a", 0, None))
        h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
        req = publish_req("pub_a_1", "a", 1, REV0, REV1)
        reply = publish_ok(req, 1, A1, 200)
        h.invoke(1, "publish", req).done(1, "publish", reply)
        return h, req, reply

    h, req, reply = base()
    h.invoke(2, "publish", req).done(2, "publish", reply)
    other = publish_req("pub_a_1", "a", 1, REV0, REV2)
    h.invoke(2, "publish", other).done(2, "publish", publish_err(other, "idempotency-conflict", {
        "operation_id": "pub_a_1", "expected_operation_digest": digest(req), "actual_operation_digest": digest(other)}))
    assert h.check()["valid"] is True

    h, req, _ = base()
    h.invoke(2, "publish", req).done(2, "publish", publish_ok(req, 1, A1, 300))  # a second, fresh success
    assert h.check()["valid"] is False


def test_an_id_bound_on_another_item_may_be_refused() -> None:
    # Wowbagger keys operation ids by the id alone (found by the reuse-item racer, seed 11):
    # vectors.md keys outcomes by (id, namespace, item), the contract's text allows both
    from checkers.invariants import idempotence

    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    req = publish_req("pub_a_1", "a", 1, REV0, REV1)
    h.invoke(1, "publish", req).done(1, "publish", publish_ok(req, 1, A1, 200))
    other_item = "wb_01Q4837BM01W70T30B184GG1R7"
    other = dict(req, item_id=other_item, claim_fence=dict(req["claim_fence"], item_id=other_item))
    h.invoke(2, "publish", other).done(2, "publish", publish_err(other, "idempotency-conflict", {
        "operation_id": "pub_a_1", "expected_operation_digest": digest(req), "actual_operation_digest": digest(other)}))
    assert h.check()["valid"] is True
    assert idempotence.check(h.ops)["valid"] is True
    h.ops[-1]["value"]["envelope"]["error"]["details"]["expected_operation_digest"] = digest(other)
    assert h.check()["valid"] is False   # a conflict that names the request's own digest


def test_history_without_register_ops_is_valid() -> None:
    assert check([], {})["valid"] is True
