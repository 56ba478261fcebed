"""The claims workload's careless-client knobs (``blind_retry_rate``,
``stale_fence_rate``) against the real SQLite engine in logical time: the
situations really happen, a correct backend answers them as the contract says
and the checkers stay valid, and the mutants they target are flagged."""

from __future__ import annotations

import pytest
from claims_sim_support import code, pairs, simulate_claims

from checkers import run_checkers
from workloads.claims import ClaimsConfig, plan_cycle

CORRECT = {"backend": "sqlite"}


def run(tmp_path, cfg: ClaimsConfig, spec=CORRECT, seed=5, workers=2, seconds=12, lose=lambda op: False):
    h, ctx, _, final = simulate_claims(tmp_path, cfg, spec, seed, workers, seconds, lose)
    return h, ctx, final


def test_knobs_are_on_by_default_and_seeded():
    cfg = ClaimsConfig()
    assert 0 < cfg.blind_retry_rate < 1 and 0 < cfg.stale_fence_rate <= 1
    plans = [plan_cycle(3, t, c, 6, cfg) for t in range(4) for c in range(50)]
    assert plans == [plan_cycle(3, t, c, 6, cfg) for t in range(4) for c in range(50)]
    assert any(p["blind_retry"] for p in plans) and not all(p["blind_retry"] for p in plans)
    off = ClaimsConfig(blind_retry_rate=0, stale_fence_rate=0)
    assert not any(plan_cycle(3, t, c, 6, off)["blind_retry"] or plan_cycle(3, t, c, 6, off)["stale_fence"]
                   for t in range(4) for c in range(50))
    # the knobs only add draws after the old ones: item, work and backoff are unchanged
    assert {k: plans[0][k] for k in ("item", "work_ms", "backoff_ms")} == \
        {k: plan_cycle(3, 0, 0, 6, off)[k] for k in ("item", "work_ms", "backoff_ms")}


def test_blind_retry_resends_the_identical_request_and_gets_the_stored_envelope(tmp_path):
    cfg = ClaimsConfig(namespaces=1, items=2, work_ms=(50, 300), blind_retry_rate=1.0, stale_fence_rate=0)
    h, ctx, final = run(tmp_path, cfg)
    ps = pairs(h)
    blind = [(ps[k], ps[k + 1]) for k in range(len(ps) - 1)
             if ps[k][0]["f"] == "publish" and ps[k + 1][0]["f"] == "publish"
             and ps[k + 1][0]["value"] == ps[k][0]["value"] and ps[k][1]["type"] in ("ok", "fail")]
    assert len(blind) >= 3
    assert any(first[1]["type"] == "ok" for first, _ in blind)
    for (inv, first), (inv2, second) in blind:
        assert inv2["process"] == inv["process"]       # no read in between: a blind retry
        if first["type"] == "ok" or code(first) == "claim-fence-rejected":   # stored kinds replay verbatim
            assert second["value"] == first["value"]
    ids = [o["operation_id"] for o in final["publication_outcomes"]]
    assert len(ids) == len(set(ids))                   # one write per operation id
    verdict = run_checkers(h, ctx)
    assert verdict["valid"] is True, {k: v["anomalies"][:2] for k, v in verdict["checkers"].items() if v["valid"] is not True}


def test_stale_fence_under_the_same_owner_is_rejected_and_stored(tmp_path):
    cfg = ClaimsConfig(namespaces=1, items=1, work_ms=(50, 300), lease_ms=1500, blind_retry_rate=0, stale_fence_rate=1.0)
    h, ctx, final = run(tmp_path, cfg, workers=1)
    ps = pairs(h)
    acquired = {}
    stale = []
    for inv, done in ps:
        v = inv["value"]
        if inv["f"] == "acquire" and done["type"] == "ok":
            acquired.setdefault(v["owner_id"], []).append(done["value"]["envelope"]["result"]["claim"]["epoch"])
        if inv["f"] == "publish":
            owner, epoch = v["claim_fence"]["owner_id"], v["claim_fence"]["epoch"]
            if acquired.get(owner) and epoch != acquired[owner][-1]:
                assert epoch in acquired[owner][:-1]        # an older epoch of the same owner
                stale.append((inv, done))
    assert len(stale) >= 2
    for inv, done in stale:
        assert done["type"] == "fail" and code(done) == "claim-fence-rejected"
        assert done["value"]["envelope"]["error"]["details"]["reason"] == "epoch-mismatch"
    stored = {o["operation_id"]: o for o in final["publication_outcomes"]}
    assert all(inv["value"]["operation_id"] in stored for inv, _ in stale)   # the rejection is a stored outcome
    # after the refusal the agent publishes with its current fence, and that one is accepted
    k = ps.index(stale[0])
    nxt_inv, nxt = ps[k + 1]
    assert nxt_inv["f"] == "publish" and nxt["type"] == "ok"
    verdict = run_checkers(h, ctx)
    assert verdict["valid"] is True, {k: v["anomalies"][:2] for k, v in verdict["checkers"].items() if v["valid"] is not True}


def test_a_new_process_never_reuses_the_old_owners_epochs(tmp_path):
    """After ``info`` the worker is a new owner (design.md): it has no old epoch to go stale with."""
    lost = []

    def lose(op):
        if op["f"] == "renew" and len(lost) < 2:
            lost.append(op["process"])
            return True
        return False

    cfg = ClaimsConfig(namespaces=1, items=1, work_ms=(50, 300), blind_retry_rate=0, stale_fence_rate=1.0)
    h, _, _ = run(tmp_path, cfg, workers=1, lose=lose)
    owners_of = {}
    for inv, done in pairs(h):
        if inv["f"] == "acquire" and done["type"] == "ok":
            owners_of.setdefault(inv["value"]["owner_id"], set()).add(done["value"]["envelope"]["result"]["claim"]["epoch"])
        if inv["f"] == "publish":
            owner = inv["value"]["claim_fence"]["owner_id"]
            assert owner == f"agent-p{inv['process']}" and inv["value"]["claim_fence"]["epoch"] in owners_of[owner]


@pytest.mark.parametrize("factory,knob,checker,anomaly", [
    ("chaos.testing.mutants:open_non_idempotent_publish", "blind_retry_rate", "idempotence", None),
    ("chaos.testing.mutants:open_fence_owner_only", "stale_fence_rate", "stale_write", "stale-fence-accepted"),
])
def test_the_knobs_expose_the_mutants_they_target(tmp_path, factory, knob, checker, anomaly):
    cfg = ClaimsConfig(namespaces=1, items=1, work_ms=(50, 300), **{"blind_retry_rate": 0, "stale_fence_rate": 0, knob: 1.0})
    h, ctx, _ = run(tmp_path, cfg, spec={"backend": "python", "factory": factory}, workers=1)
    verdict = run_checkers(h, ctx)
    found = verdict["checkers"][checker]
    assert found["valid"] is False, f"{checker} did not flag {factory}"
    if anomaly:
        assert anomaly in {a["type"] for a in found["anomalies"]}


def test_scenarios_take_the_knobs_and_reject_bad_rates(tmp_path):
    from workloads import scenario

    good = tmp_path / "careless.yaml"
    good.write_text("name: x\ndescription: y\nclaims: {blind_retry_rate: 0.5, stale_fence_rate: 0}\n")
    assert scenario.load(str(good))["claims"] == {"blind_retry_rate": 0.5, "stale_fence_rate": 0}
    for bad in ("blind_retry_rate: 1.5", "stale_fence_rate: -0.1", "blind_retry_rate: yes"):
        path = tmp_path / "bad.yaml"
        path.write_text(f"name: x\ndescription: y\nclaims: {{{bad}}}\n")
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            scenario.load(str(path))


def test_the_stale_writer_recipe_is_the_shipped_scenario():
    from chaos.testing.mutants_detect import RECIPES
    from workloads import scenario

    data = scenario.load("stale-writer")
    assert RECIPES["stale-writer"].scenario == "stale-writer" and data["nemesis"] == ["pause"]
    assert data["claims"] == {"race_pairs": 0, "namespaces": 1, "items": 2, "lease_ms": 1500, "work_ms": (800, 1200)}
    assert data["nemesis_opts"] == {"pause_at": "publish", "pause_gap_ms": (100, 400), "pause_ms": (1800, 2200)}
    # the hold outlasts the lease, and the rival's lease + work outlasts the hold: resumed into a live rival lease
    assert data["nemesis_opts"]["pause_ms"][0] > data["claims"]["lease_ms"]
