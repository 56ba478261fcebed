"""Never cry wolf (short version of ``benchmarks/false_alarm_soak.py``): the
CORRECT sqlite backend under every nemesis this machine supports, at once,
for a few seeds. No verdict may be ``invalid``; an ``unknown`` must state its
reason (e.g. a requested fault that never took effect) - a silent unknown
would hide a broken checker.
"""

from __future__ import annotations

import importlib.util

import pytest

from chaos.testing.mutants_detect import Recipe, chaos, detected_by

HAVE_RUN = importlib.util.find_spec("chaos.commands.run") is not None


def _reasons(outcome) -> list[str]:
    out = list(outcome.results.get("notes") or [])
    for name, r in (outcome.results.get("checkers") or {}).items():
        if isinstance(r, dict) and r.get("valid") == "unknown":
            out.append(f"{name}: {r.get('error') or r.get('unknown_reasons') or ''}")
    return out


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RUN, reason="chaos run is not available in this build")
@pytest.mark.parametrize("seed", [11, 12])
def test_correct_sqlite_is_never_flagged_under_every_nemesis(seed, tmp_path):
    from chaos.nemesis import supported

    faults = tuple(supported("sqlite"))
    assert faults, "no nemesis is supported here: the soak would prove nothing"
    outcome = chaos(None, Recipe(None, faults, workers=4, time_limit=8.0), str(tmp_path / "store"), seed=seed)
    alarms = [f"[{k}] {a['type']} ops={a['ops']}: {a['explanation']}"
              for k, anomalies in detected_by(outcome).items() for a in anomalies[:3]]
    assert outcome.verdict != "invalid", "FALSE ALARM on the correct backend:\n" + "\n".join(alarms)
    assert outcome.verdict in ("valid", "unknown"), f"run crashed (exit {outcome.exit_code}): {outcome.output[-800:]}"
    if outcome.verdict == "unknown":
        assert _reasons(outcome), "an unknown verdict must say why"
    stats = outcome.results.get("stats") or {}
    assert stats.get("ok", 0) > 0, "the workload made no progress: nothing was checked"
