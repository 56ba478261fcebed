"""chaos test-all: matrix parsing, expansion and bad-input handling (no runs)."""

from __future__ import annotations

import os

import pytest

from chaos.cli import main
from chaos.commands.test_all import RunOutcome, RunRequest, expand, load_matrix
from chaos.errors import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_shipped_matrices_expand():
    smoke = expand(load_matrix(os.path.join(ROOT, "matrices", "smoke.yaml")), "smoke.yaml")
    assert [(r.backend, r.nemesis, r.seed) for r in smoke] == [("sqlite", [], 3), ("sqlite", ["kill"], 3)]
    nightly = expand(load_matrix(os.path.join(ROOT, "matrices", "nightly.yaml")), "nightly.yaml")
    assert {r.backend for r in nightly} >= {"sqlite", "postgres"}
    # the budget: the runs' workload time stays well under 15 minutes
    assert sum(r.time_limit for r in nightly) + 15 * len(nightly) < 15 * 60


def test_a_request_without_workers_leaves_the_count_to_the_run():
    # the red team's default run (benchmarks/mutant_matrix.py): chaos.timing picks a
    # process-per-call program's worker count only when --workers is not given
    assert "--workers" not in RunRequest(workers=None).argv()
    assert RunRequest(workers=4).argv()[RunRequest(workers=4).argv().index("--workers") + 1] == "4"


def test_python_backend_entries_carry_their_factory(tmp_path):
    m = {"backends": [{"backend": "python", "factory": "chaos.testing.planted:open_takeover"}],
         "nemeses": ["none", "kill,pause"], "seeds": [3], "name": "p"}
    runs = expand(m)
    assert [r.nemesis for r in runs] == [[], ["kill", "pause"]]
    assert runs[0].factory == "chaos.testing.planted:open_takeover" and runs[0].name == "p-open_takeover-none"
    assert "--factory" in runs[0].argv() and runs[1].argv()[runs[1].argv().index("--nemesis") + 1] == "kill,pause"


@pytest.mark.parametrize("text, needle", [
    ("backends: [sqlite]\nseeds: [1]\nnemeses: [[]]\ncolour: red\n", "unknown key(s) colour"),
    ("backends: []\nseeds: [1]\n", "backends must be a non-empty list"),
    ("backends: [oracle]\nseeds: [1]\n", "backend 'oracle' is not one of"),
    ("backends: [sqlite]\nseeds: [one]\n", "seeds must be integers"),
    ("backends: [sqlite]\nseeds: [1]\nnemeses: [[earthquake]]\n", "unknown nemesis earthquake"),
    ("backends: [sqlite]\nseeds: [1]\ntime_limit: -1\n", "time_limit must be a number of seconds"),
    ("[1, 2", "not valid YAML"),
    ("- a list\n", "must be a mapping"),
])
def test_bad_matrix_is_one_line_and_254(tmp_path, capsys, text, needle):
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert main(["test-all", "--matrix", str(path)]) == 254
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_matrix_file(tmp_path, capsys):
    assert main(["test-all", "--matrix", str(tmp_path / "nope.yaml")]) == 254
    assert "no such file" in capsys.readouterr().err


def test_dry_run_lists_combinations(capsys):
    assert main(["test-all", "--matrix", os.path.join(ROOT, "matrices", "smoke.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 runs" in out and "kill" in out


def test_outcome_verdicts_and_command():
    req = RunRequest(seed=9)
    o = RunOutcome(req, 255, None, {}, 1.0)
    assert o.verdict == "crashed" and "--seed 9" in o.command
    o = RunOutcome(req, 1, "/x", {"verdict": "invalid", "checkers": {"c": {"valid": False, "anomalies": [
        {"type": "t", "explanation": "why", "ops": [1]}]}}, "test": {"command": ["chaos", "run", "--seed", "9"]}}, 1.0)
    assert o.explanations() == ["[c] t (ops [1]): why"] and o.command == "chaos run --seed 9"


def test_a_run_reads_back_its_own_directory_when_another_run_shares_the_store(tmp_path):
    # mutant_matrix --jobs 2: two runs in one store; each took the newest new directory, so a cell
    # read (and, passing, removed) the other run's: "no result" and a control called invalid
    from chaos.commands.test_all import new_run_dir

    store = str(tmp_path)
    before = {os.path.join(store, "control-python-3", "20261201T223900.000Z")}
    mine = os.path.join(store, "control-python-3", "20261201T223936.814Z")
    other = os.path.join(store, "namespace-blind-python-1", "20261201T223936.912Z")
    after = before | {mine, other}
    assert new_run_dir(before, after, store, "control-python-3") == mine
    assert new_run_dir(before, after, store, "namespace-blind-python-1") == other
    assert new_run_dir(before, after, store, "absent") is None
    assert new_run_dir(before, after, store, None) == other   # unnamed: the newest, as before
