"""The deterministic run's verdict from what its checkers said: what makes it unknown and what does not."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

from chaos.history_store import HistoryWriter
from chaos.nemesis import Coverage
from chaos.runner import RunConfig
from chaos.workload_kinds.base import WorkloadKind

#: what a black box's set-up says (Wowbagger's profile maps no legacy writes): said, not a verdict
SETUP_NOTE = "racer episodes left out, the backend lacks what they need: legacy-writes (needs legacy-writes)"


class AllValid(WorkloadKind):   # every checker passed: only the run's own notes can make it unknown
    name = "claims"

    def ctx(self, cfg, world, capabilities):
        return {}

    def check(self, ops, ctx):
        return {"valid": True, "checkers": {"x": {"valid": True, "anomalies": [], "stats": {}}}}


def _verdict(tmp_path, notes: list, final_incomplete: list) -> dict:
    from chaos.deterministic.run import _results

    history = HistoryWriter(str(tmp_path / "history.jsonl"))
    history.append({"process": 0, "type": "invoke", "f": "read", "time": 1})
    history.append({"process": 0, "type": "ok", "f": "read", "time": 2})
    target = SimpleNamespace(capabilities=None, known_deviations=None)
    summary = {"notes": []}
    results, _wall = _results(RunConfig(seed=1, workers=1), AllValid(), None, target, history, Coverage([]),
                              list(notes), summary, list(final_incomplete))
    history.close()
    return results


def test_a_set_up_note_is_said_but_a_valid_run_stays_valid(tmp_path):
    """Every Wowbagger run ended unknown for its set-up's note that racer episodes were left out
    (the timed mode says the note and stays valid)."""
    results = _verdict(tmp_path, [SETUP_NOTE], [])
    assert results["verdict"] == "valid" and results["exit_code"] == 0
    assert results["notes"] == [SETUP_NOTE]


def test_a_final_read_back_that_ended_info_makes_a_valid_run_unknown(tmp_path):
    results = _verdict(tmp_path, [SETUP_NOTE], ["final read-back read ended info"])
    assert results["verdict"] == "unknown" and results["exit_code"] == 2
    assert results["notes"] == [SETUP_NOTE, "final read-back read ended info"]


F5_RUN = Path(__file__).resolve().parent / "data" / "wowbagger_det_f5_seed2.json.gz"
WOWBAGGER_PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"


def _f5_run() -> tuple[list, dict]:
    with gzip.open(F5_RUN, "rt") as f:
        doc = json.load(f)
    return doc["history"], doc["ctx"]


def test_f5_met_in_deterministic_mode_is_named_by_durability_and_acknowledged_by_the_profile():
    """A real deterministic Wowbagger run (stored: its history and checker context) met F5 (an
    acquire refused clock-floor-persistence-failed after the EIO at its journal's fsync, its claim in
    effect): durability names failed-acquire-took-effect on those ops, and the profile's F5
    acknowledgements cover it, as in the timed mode; without them the run is invalid."""
    import checkers
    from backends.external.profile import load_profile

    history, ctx = _f5_run()
    bare = checkers.run_checkers(history, ctx)
    assert bare["valid"] is False
    named = bare["checkers"]["durability"]["anomalies"]
    assert [(a["type"], a["data"]["owner"], a["data"]["epoch"], a["data"]["code"]) for a in named] == \
        [("failed-acquire-took-effect", "agent-p1", "2", "clock-floor-persistence-failed")]
    assert {22, 23, 55, 56} <= set(named[0]["ops"])
    assert bare["checkers"]["linearizable"]["valid"] is False   # the claim the refusal left fits no order

    known = load_profile(WOWBAGGER_PROFILE).known_deviations
    merged = checkers.run_checkers(history, dict(ctx, known_deviations=known))
    assert merged["valid"] is True, {k: v.get("anomalies") for k, v in merged["checkers"].items() if v["valid"] is not True}
    matched = {d["id"]: d.get("matched", 0) for d in merged["known_deviations"]}
    assert matched["F5-refused-acquire-took-effect"] == 1 and matched["F5-nonlinearizable"] >= 1


def test_a_final_read_back_that_ended_info_says_why():
    """Wowbagger seed 8 (6 s): the final commit answered git-failed behind the index.lock a killed git
    left; the note says so, not only that it ended info."""
    from chaos.deterministic.run import _info_reason

    reply = {"exit": 1, "envelope": {"ok": False, "error": {"code": "git-failed", "message": "index.lock exists"}}}
    assert "git-failed" in _info_reason({"f": "commit", "type": "info", "value": reply})
    assert _info_reason({"f": "read", "type": "info", "error": "worker w0.0 died during the call"}) == \
        "worker w0.0 died during the call"
