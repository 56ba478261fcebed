"""checkers.compose / run_checkers and the ``chaos check RUN_DIR`` command."""

from __future__ import annotations

import json

import pytest
from test_invariants_support import standard_scenario

from chaos.cli import main
from checkers import check_safe, compose, default_checkers, merge_valid, run_checkers


def test_merge_priority():
    assert merge_valid([True, True]) is True
    assert merge_valid([True, "unknown"]) == "unknown"
    assert merge_valid(["unknown", False, True]) is False
    assert merge_valid([None]) == "unknown"
    assert merge_valid([]) is True


def test_raising_checker_becomes_unknown():
    def boom(history, ctx):
        raise RuntimeError("model exploded")

    r = check_safe(boom, [], {})
    assert r["valid"] == "unknown" and "model exploded" in r["error"]
    out = compose({"ok": lambda h, c: {"valid": True}, "boom": boom})([], {})
    assert out["valid"] == "unknown" and set(out["checkers"]) == {"ok", "boom"}
    out = compose({"bad": lambda h, c: {"valid": False}, "boom": boom})([], {})
    assert out["valid"] is False


def test_default_checkers_and_run():
    names = default_checkers(include_linearizable=False)
    assert set(names) == {"dual_ownership", "decisions", "epochs", "floors", "idempotence", "stale_write", "durability",
                          "envelopes", "capability_honesty", "git_finalization", "reply_protocol", "requests"}
    s, _ = standard_scenario()
    assert run_checkers(s.history, s.ctx(), names)["valid"] is True


def _run_dir(tmp_path, history, results=None):
    d = tmp_path / "run"
    d.mkdir()
    with open(d / "history.jsonl", "w") as f:
        for op in history:
            f.write(json.dumps(op) + "\n")
    if results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


def test_chaos_check_valid_and_write(tmp_path, capsys):
    s, _ = standard_scenario()
    d = _run_dir(tmp_path, s.history, {"ctx": s.ctx(), "seed": 7})
    assert main(["check", str(d), "--no-linearizable"]) == 0
    out = capsys.readouterr().out
    assert "dual_ownership" in out and "verdict: valid" in out
    assert main(["check", str(d), "--no-linearizable", "--write"]) == 0
    res = json.loads((d / "results.json").read_text())
    assert res["seed"] == 7 and res["verdict"] == "valid" and res["exit_code"] == 0 and "stale_write" in res["checkers"]


def test_chaos_check_invalid_explains(tmp_path, capsys):
    s, L = standard_scenario()
    L["r1"]["value"]["envelope"]["result"]["outcome"]["exit"] = 3
    d = _run_dir(tmp_path, s.history, {"ctx": s.ctx()})
    assert main(["check", str(d), "--only", "idempotence"]) == 1
    out = capsys.readouterr().out
    assert "publication-read-differs" in out and "contract §6" in out
    assert main(["check", str(d), "--only", "idempotence", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["valid"] is False


def test_chaos_check_unknown_without_capabilities(tmp_path):
    s, _ = standard_scenario()
    d = _run_dir(tmp_path, s.history)
    assert main(["check", str(d), "--only", "capability_honesty"]) == 2


@pytest.mark.parametrize("setup", ["missing", "empty"])
def test_chaos_check_usage_errors(tmp_path, capsys, setup):
    d = tmp_path / "nothing"
    if setup == "empty":
        d.mkdir()
    assert main(["check", str(d)]) == 254
    err = capsys.readouterr().err.strip()
    assert err.startswith("chaos: error:") and len(err.splitlines()) == 1
