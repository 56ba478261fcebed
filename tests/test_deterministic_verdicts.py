"""The deterministic run's verdict from what its checkers said: what makes it unknown and what does not."""

from __future__ import annotations

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
