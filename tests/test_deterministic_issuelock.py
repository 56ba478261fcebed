"""The issue-lock workload in the deterministic mode, its default on the stores the scheduler controls:
three runs of one seed, in stores of three path lengths, give one history and one results.json (but for
the store's path in the reproduce line), every requested fault in effect; a store it does not control
is refused up front with why; an issue-lock program (the external store) is hosted as a claims program
is. Real SQLite (locks.db), real git (gitfile), real worker processes, real programs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_bad_input import one_line_254  # one definition of what a one-line usage error is
from test_run_issuelock import chaos

#: seed 2 of gitfile meets two fsync errors inside git, whose words name the store's files
FLAGS = ("--workload", "issue-lock", "--seed", "2", "--workers", "4", "--time-limit", "5", "--no-report")


@pytest.mark.parametrize("backend", ["sqlite", "gitfile"])
def test_three_runs_of_one_issue_lock_seed_give_one_history_wherever_the_store_is(tmp_path, backend):
    texts, digests = [], set()
    for store in (tmp_path / "s", tmp_path / "store", tmp_path / "a-longer-store"):
        proc = chaos("run", "--backend", backend, "--store", str(store), *FLAGS)   # no flag: the default
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "timed mode" not in proc.stderr and "chaos: deterministic: seed 2" in proc.stderr
        (path,) = store.glob("*/2*/results.json")
        results = json.loads(path.read_text())
        assert results["verdict"] == "valid" and results["deterministic"]["points"] > 1000
        coverage = results["fault_coverage"]
        assert {n: (c["fired"], c["took_effect"]) for n, c in coverage.items() if c["requested"]} == {
            n: (2, 2) for n in ("kill", "pause", "clock", "fsync", "lost-reply")}, coverage
        texts.append(path.read_text().replace(str(store), "STORE"))
        digests.add(results["history_sha256"])
    assert len(digests) == 1 and texts[0] == texts[1] == texts[2]


def test_a_store_the_scheduler_does_not_control_is_refused_up_front():
    # an importable factory not known to keep its state in the run dir (the issue-lock CLI's, as a class)
    proc = chaos("run", "--deterministic", "--workload", "issue-lock", "--backend", "python", "--factory",
                 "backends.issuelock.external:open_backend", "--time-limit", "1")
    assert "an outside store class" in one_line_254(proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_a_planted_takeover_of_a_live_lock_is_found_and_its_seed_replays_it(tmp_path):
    """A concurrency bug of the red team (bootstrap takes over a live foreign lock: two agents on one issue)
    runs in this mode by default, is named by its checker, and the run's test.yaml replays the history."""
    proc = chaos("run", "--backend", "python", "--factory", "chaos.testing.issuelock_bugs:open_takeover_ignores_expiry",
                 "--store", str(tmp_path), "--workload", "issue-lock", "--seed", "1", "--workers", "4",
                 "--time-limit", "5", "--no-report")
    assert proc.returncode == 1 and "timed mode" not in proc.stderr, proc.stderr[-2000:]
    (run,) = tmp_path.glob("*/2*")
    results = json.loads((run / "results.json").read_text())
    assert [n for n, c in results["checkers"].items() if c["valid"] is False] == ["single_owner"]
    again = chaos("run", "--config", str(run / "test.yaml"), "--no-report")
    assert again.returncode == 1 and "deterministic: reproduced the history" in again.stderr, again.stderr[-2000:]
    script = chaos("repro", str(run))      # its scripts call the work-claim contract: said, not a traceback
    assert script.returncode == 1 and "built for the claims workload only" in script.stderr, script.stderr[-2000:]
    assert "Traceback" not in script.stderr and script.stderr.count("\n") == 1


PLANTED_CLI = Path(__file__).with_name("planted_lock_cli.py")


def test_an_issue_lock_program_is_hosted_by_default_and_its_planted_takeover_replays(tmp_path):
    """The suite's own issue-lock CLI as a black box runs deterministically with no mode flag, every
    requested fault in effect at an exact point; the same CLI over a planted bug (bootstrap takes over a
    live foreign lock) is named by single_owner, and its run's test.yaml replays the history."""
    proc = chaos("run", "--workload", "issue-lock", "--backend", "external", "--command", "chaos lock-backend sqlite",
                 "--seed", "3", "--workers", "4", "--time-limit", "3", "--nemesis", "kill,fsync,lost-reply",
                 "--store", str(tmp_path / "real"), "--no-report")
    assert proc.returncode == 0 and "timed mode" not in proc.stderr, proc.stderr[-2000:]
    (path,) = (tmp_path / "real").glob("*/2*/results.json")
    results = json.loads(path.read_text())
    coverage = results["fault_coverage"]
    assert {n: c["fired"] == c["took_effect"] > 0 for n, c in coverage.items() if c["requested"]} == {
        "kill": True, "fsync": True, "lost-reply": True}, coverage
    assert not results["deterministic"]["notes"], results["deterministic"]["notes"]

    command = f"{sys.executable} {PLANTED_CLI} takeover-ignores-expiry"
    proc = chaos("run", "--workload", "issue-lock", "--backend", "external", "--command", command, "--seed", "1",
                 "--workers", "4", "--time-limit", "5", "--store", str(tmp_path / "bug"), "--no-report")
    assert proc.returncode == 1 and "timed mode" not in proc.stderr, proc.stderr[-2000:]
    (run,) = (tmp_path / "bug").glob("*/2*")
    results = json.loads((run / "results.json").read_text())
    assert [n for n, c in results["checkers"].items() if c["valid"] is False] == ["single_owner"]
    again = chaos("run", "--config", str(run / "test.yaml"), "--no-report")
    assert again.returncode == 1 and "deterministic: reproduced the history" in again.stderr, again.stderr[-2000:]
