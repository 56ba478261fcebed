"""Property: the claim model never cries wolf on a correct backend, and catches a forged takeover.

Histories come from ``test_invariants_support.simulate``: the real reference
backend under random concurrent schedules with lost replies, crashes, backward
clock steps and restarts (every reply in them is real).
"""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants_support import simulate

from checkers.linearizable import check
from checkers.linearizable.claim_ops import instant_ms


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 5), items=st.integers(1, 2),
       lost=st.sampled_from([0.0, 0.1, 0.3]), backstep=st.sampled_from([0.0, 0.3]),
       restart=st.sampled_from([0.0, 0.03]))
def test_reference_histories_are_linearizable(seed, workers, items, lost, backstep, restart):
    history, ctx = simulate(seed, n_workers=workers, steps=250, n_items=items, p_lost=lost,
                            p_backstep=backstep, p_restart=restart)
    result = check(history, dict(ctx, timeout=30))
    assert result["valid"] is True, [a["explanation"] for a in result["anomalies"]]


def _forge_takeover(history: list[dict]) -> list[dict] | None:
    """Turn the first ``claim-held`` acquire into a success: a second unexpired owner."""
    invokes = {}
    for i, op in enumerate(history):
        if op["type"] == "invoke":
            invokes[op["process"]] = op
        if op["type"] == "fail" and op["f"] == "acquire":
            env = op["value"]["envelope"]
            if env["error"]["code"] != "claim-held":
                continue
            d, req = env["error"]["details"], invokes[op["process"]]["value"]
            t = instant_ms(d["observed_at"])
            epoch = str(int(d["last_epoch"]) + 1)
            claim = {"owner_id": req["owner_id"], "epoch": epoch, "issued_at": d["observed_at"],
                     "expires_at": _fmt(t + req["lease_duration_ms"])}
            forged = copy.deepcopy(history)
            forged[i] = dict(op, type="ok", value={"exit": 0, "envelope": {
                "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1,
                "state": "committed", "result": {"claim": claim, "read_back": {
                    **{k: d[k] for k in ("ledger_namespace", "item_id", "observed_at")},
                    "last_epoch": epoch, "active": claim}}}})
            return forged
    return None


def _fmt(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_forged_takeover_during_a_live_lease_is_caught():
    caught = tried = 0
    for seed in range(25):
        history, ctx = simulate(seed, n_workers=4, steps=250, n_items=1, p_lost=0.1)
        forged = _forge_takeover(history)
        if forged is None:
            continue
        tried += 1
        result = check(forged, dict(ctx, timeout=30))
        caught += result["valid"] is False
        assert result["valid"] is False, seed
    assert tried >= 10 and caught == tried
