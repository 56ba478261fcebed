"""Property: histories of the reference model (a correct backend) under random
concurrent schedules, lost replies, crashes, backward clock steps and restarts
are always judged valid by every invariant - the checkers never cry wolf."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants_support import simulate

from checkers import default_checkers, run_checkers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 5), items=st.integers(1, 3),
       namespaces=st.integers(1, 2), lost=st.sampled_from([0.0, 0.05, 0.2]),
       backstep=st.sampled_from([0.0, 0.05, 0.3]), restart=st.sampled_from([0.0, 0.02]))
def test_reference_histories_are_valid(seed, workers, items, namespaces, lost, backstep, restart):
    history, ctx = simulate(seed, n_workers=workers, steps=250, n_items=items, n_ns=namespaces, p_lost=lost,
                            p_backstep=backstep, p_restart=restart)
    result = run_checkers(history, ctx, default_checkers(include_linearizable=False))
    bad = {n: [a["explanation"] for a in r["anomalies"][:2]] or r.get("error")
           for n, r in result["checkers"].items() if r["valid"] is not True}
    assert result["valid"] is True, bad


def test_simulation_exercises_the_interesting_cases():
    """The generator really produces overlap, lost replies, takeovers and replays."""
    seen = set()
    for seed in range(20):
        history, _ = simulate(seed, n_workers=4, steps=300, n_items=2, p_lost=0.1)
        open_procs = 0
        for op in history:
            seen.add((op["f"], op["type"]))
            if op["type"] == "invoke":
                open_procs += 1
            elif op["process"] != "nemesis":
                open_procs -= 1
            if open_procs >= 3:
                seen.add("overlap")
    for case in (("acquire", "ok"), ("acquire", "fail"), ("acquire", "info"), ("publish", "ok"),
                 ("publish", "fail"), ("publish", "info"), ("renew", "ok"), ("release", "ok"),
                 ("publication-read", "ok"), ("restart", "info"), "overlap"):
        assert case in seen, case
