"""The careless clients' two episodes (in the default rotation; the
careless-requests scenario runs only them) end to end, in logical time against
real engines (``claims_sim_support``).

* canonical-request (contract §5, §6 step 2): ``noncanonical-requests`` sends
  fences, acquires and renews whose values break the grammar; a correct
  backend refuses each with invalid-request and stays valid, a backend that
  decides them (as Wowbagger 0.1.0-alpha.7 does with a publish fence) is
  named by ``noncanonical-request-decided``.
* refusal-keeps-floor (vectors.md §5.1 rule 8): ``refusals-keep-floor`` pins
  publishes refused before the floor step days ahead and reads right after; a
  backend that persists the floor before it validates the candidate (as
  Wowbagger does) is named by ``floor-moved-by-refusal``.

And in the default workload only these episodes' aimed requests are
noncanonical or pinned refusals, and a correct backend stays valid."""

from __future__ import annotations

import collections

import pytest
from claims_sim_support import code, pairs, simulate_claims

from backends.contract.schemas import first_invalid_pointer
from checkers import run_checkers
from checkers.invariants.requests import CHECKED_OPS
from chaos.testing.mutants import RED_TEAM
from workloads.claims import ClaimsConfig
from workloads.coverage import coverage, missing, plan_for

NONCANONICAL = ClaimsConfig(race_pairs=1, episodes=("noncanonical-requests",))
LABELS = {"fence-owner-grammar": "/claim_fence/owner_id", "fence-epoch-past-max": "/claim_fence/epoch",
          "fence-owner-too-long": "/claim_fence/owner_id", "acquire-owner-grammar": "/owner_id",
          "renew-epoch-past-max": "/epoch"}


def _aimed(h) -> dict:
    out = collections.defaultdict(list)
    for inv, done in pairs(h):
        episode, _, label = inv.get("intent", "").rpartition(":")
        if episode == "noncanonical-requests" and label in LABELS and done is not None:
            out[label].append((inv, done))
    return out


def test_each_aimed_value_breaks_exactly_the_member_the_episode_names(tmp_path):
    h, _, _, _ = simulate_claims(tmp_path, NONCANONICAL, {"backend": "reference"}, 3, 4, 3)
    aimed = _aimed(h)
    assert set(aimed) == set(LABELS)
    for label, ops in aimed.items():
        assert all(first_invalid_pointer(inv["f"], inv["value"]) == LABELS[label] for inv, _ in ops), label


def test_a_correct_backend_refuses_each_with_invalid_request_and_stays_valid(tmp_path):
    h, ctx, _, _ = simulate_claims(tmp_path, NONCANONICAL, {"backend": "sqlite"}, 3, 4, 3)
    aimed = _aimed(h)
    assert set(aimed) == set(LABELS)
    assert {code(done) for ops in aimed.values() for _, done in ops} == {"invalid-request"}
    assert run_checkers(h, ctx)["valid"] is True
    table = coverage(h, plan_for({"race_pairs": 1, "episodes": ("noncanonical-requests",)}, 4, ctx["capabilities"]))
    for path in ("publish with a noncanonical fence refused", "claim request with a noncanonical value refused"):
        assert table[path]["requested"] and table[path]["completed"] >= 1, (path, table[path])
    assert not [p for p in missing(table) if p != "publication-read"]   # no final phase in a simulation


def test_a_backend_that_decides_a_noncanonical_fence_is_named_by_its_rule(tmp_path):
    spec = {"backend": "python", "factory": RED_TEAM["fence-grammar-unchecked"].factory}
    h, ctx, _, _ = simulate_claims(tmp_path, NONCANONICAL, spec, 3, 4, 3)
    fences = [done for label, ops in _aimed(h).items() if label.startswith("fence-") for _, done in ops]
    assert fences and {code(d) for d in fences} == {"claim-fence-rejected"}   # decided, as Wowbagger does
    result = run_checkers(h, ctx)
    found = result["checkers"]["requests"]["anomalies"]
    assert result["valid"] is False and {a["type"] for a in found} == {"noncanonical-request-decided"}
    assert {a["data"]["pointer"] for a in found} == {"/claim_fence/owner_id", "/claim_fence/epoch"}
    assert all("§5" in a["explanation"] and a["data"]["code"] == "claim-fence-rejected" for a in found)


FLOOR = ClaimsConfig(race_pairs=1, episodes=("refusals-keep-floor",))
AHEAD = {"invalid-candidate-ahead": "ledger-invalid", "bad-digest-ahead": "candidate-digest-mismatch",
         "noncanonical-ahead": "invalid-request"}


def test_refusals_decided_days_ahead_leave_a_correct_backends_floor(tmp_path):
    h, ctx, _, _ = simulate_claims(tmp_path, FLOOR, {"backend": "sqlite"}, 3, 4, 3)
    seen = collections.Counter()
    for inv, done in pairs(h):
        label = inv.get("intent", "").rpartition(":")[2]
        if label in AHEAD and done is not None:
            assert code(done) == AHEAD[label] and inv["clock_ms"] > 1_894_353_330_250 + 86_400_000
            seen[label] += 1
    assert set(seen) == set(AHEAD)
    reads = [done for inv, done in pairs(h) if inv.get("intent") == "refusals-keep-floor:after-refusal" and done]
    assert reads and all(code(d) is None for d in reads)
    assert run_checkers(h, ctx)["valid"] is True
    table = coverage(h, plan_for({"race_pairs": 1, "episodes": ("refusals-keep-floor",)}, 4, ctx["capabilities"]))
    row = table["publish refused before the floor step, decided days ahead"]
    assert row["requested"] and row["completed"] >= 3


def test_a_backend_that_persists_the_floor_before_validating_is_named_by_its_rule(tmp_path):
    spec = {"backend": "python", "factory": RED_TEAM["floor-before-validation"].factory}
    h, ctx, _, _ = simulate_claims(tmp_path, FLOOR, spec, 3, 4, 3)
    result = run_checkers(h, ctx)
    found = [a for a in result["checkers"]["floors"]["anomalies"] if a["type"] == "floor-moved-by-refusal"]
    assert result["valid"] is False and found
    assert {a["data"]["code"] for a in found} == {"ledger-invalid"}     # only validation comes after its floor step
    assert all("§5.1 rule 8" in a["explanation"] and len(a["ops"]) == 4 for a in found)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_default_workload_sends_noncanonical_requests_only_where_an_episode_aims_them(tmp_path, seed):
    # every client behaviour on, every episode of the default rotation; the incomplete retry leaves
    # members out on purpose (its own rule: complete-request)
    h, ctx, _, _ = simulate_claims(tmp_path, None, {"backend": "reference"}, seed, 10, 8)
    aimed = collections.Counter()
    judged = 0
    for inv, _ in pairs(h):
        episode, _, label = inv.get("intent", "").rpartition(":")
        if inv["f"] not in CHECKED_OPS or inv.get("intent") == "incomplete-retry:incomplete-retry":
            continue
        broken = first_invalid_pointer(inv["f"], inv["value"])
        if (episode == "noncanonical-requests" and label in LABELS) or label == "noncanonical-ahead":
            assert broken is not None, inv
            aimed[label] += 1
        else:
            judged += 1
            assert broken is None, inv
    assert judged > 200 and set(aimed) == set(LABELS) | {"noncanonical-ahead"}
    assert run_checkers(h, ctx)["valid"] is True   # nor does anything else find fault with a correct backend
    pinned = {inv["intent"].rpartition(":")[2] for inv, done in pairs(h) if inv.get("clock_ms") and done and code(done) in
              ("invalid-request", "ledger-invalid", "candidate-digest-mismatch", "ledger-namespace-unbound",
               "idempotency-conflict")}
    assert pinned == set(AHEAD)   # floor-moved-by-refusal judges only the refusals its episode pins
