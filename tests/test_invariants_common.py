"""``checkers.invariants._common.Findings``: the cap on a checker's anomaly
list never hides a type (a real run of the planted exact-bytes bug listed
200 broken revision chains, and its ``unaccepted-revision``, the finding that
names the rule it breaks, only in the count)."""

from __future__ import annotations

from checkers.invariants._common import KEPT_PER_TYPE, MAX_ANOMALIES, Findings


def test_a_flood_of_one_type_does_not_hide_a_type_found_after_the_cap():
    f = Findings()
    for i in range(MAX_ANOMALIES + 300):
        f.add("revision-chain-broken", "a lost update", [i])
    for i in range(KEPT_PER_TYPE + 20):
        f.add("unaccepted-revision", "a write outside the fenced path", [i, None])
    r = f.result({"accepted_publishes": 3})
    types = [a["type"] for a in r["anomalies"]]
    assert types.count("revision-chain-broken") == MAX_ANOMALIES
    assert types.count("unaccepted-revision") == KEPT_PER_TYPE
    assert r["valid"] is False
    assert r["stats"] == {"accepted_publishes": 3, "anomalies_total": MAX_ANOMALIES + 300 + KEPT_PER_TYPE + 20,
                          "anomalies_by_type": {"revision-chain-broken": MAX_ANOMALIES + 300,
                                                "unaccepted-revision": KEPT_PER_TYPE + 20}}
    assert r["anomalies"][-1]["ops"] == [KEPT_PER_TYPE - 1]


def test_under_the_cap_every_anomaly_is_listed_in_order():
    f = Findings()
    for t in ("b", "a", "b"):
        f.add(t, t, [])
    r = f.result()
    assert [a["type"] for a in r["anomalies"]] == ["b", "a", "b"]
    assert r["stats"]["anomalies_by_type"] == {"a": 1, "b": 2}


def test_no_finding_lists_no_counts():
    r = Findings().result()
    assert r["valid"] is True and r["stats"] == {"anomalies_total": 0}
