"""chaos test-all fanned out over Dask: a tiny real campaign on a LocalCluster and on a separately
started scheduler, shards that cover the matrix once, and the bad flags (one line, exit 254)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import psutil
import pytest

from chaos.campaign import fanout
from chaos.cli import main
from test_bad_input import one_line_254  # one definition of what a one-line usage error is

DASK = os.path.join(os.path.dirname(sys.executable), "dask")

# deterministic sqlite runs of 1 s: the shortest real run; the planted backend breaks the
# one-owner rule, so the campaign has a failure to time
TINY = """name: tiny
backends: [sqlite, {backend: python, factory: "chaos.testing.planted:open_takeover"}]
nemeses: [[]]
seeds: [1, 2]
time_limit: 1
workers: 3
deterministic: true
reports: false
"""


def _campaign(tmp_path, capsys, matrix_text: str, *flags) -> tuple[int, str, str]:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(matrix_text)
    code = main(["test-all", "--matrix", str(matrix), "--store", str(tmp_path / "store"), *flags])
    out = capsys.readouterr().out
    summary = out.rsplit("campaign: ", 1)[1].split(";")[0]
    return code, out, summary


def _records(summary: str) -> list[dict]:
    with open(os.path.join(os.path.dirname(summary), "runs.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_a_tiny_campaign_on_a_local_cluster_aggregates_every_seed(tmp_path, capsys):
    code, out, summary = _campaign(tmp_path, capsys, TINY, "--workers", "2",
                                   "--junit", str(tmp_path / "campaign.xml"))
    records = _records(summary)
    assert sorted((r["backend"], r["seed"]) for r in records) == [
        ("open_takeover", 1), ("open_takeover", 2), ("sqlite", 1), ("sqlite", 2)], out
    planted = [r for r in records if r["backend"] == "open_takeover" and r["verdict"] == "invalid"]
    assert planted and all(r["findings"] for r in planted), records  # seed 1 meets the planted bug in 1 s
    assert all(r["verdict"] in ("valid", "unknown") for r in records if r["backend"] == "sqlite"), records
    assert code == 1  # the worst run's
    text = open(summary).read()
    first = min(planted, key=lambda r: r["done_at_s"])
    assert "runs: 4 of 4" in text and "finished (complete)" in text
    assert f"seed {first['seed']} at {first['done_at_s']:.1f} s" in text, text
    assert "a Dask LocalCluster of 2 worker processes" in text
    suites = ET.parse(tmp_path / "campaign.xml").getroot().findall("testsuite")
    assert len(suites) == 4 and sum(s.get("failures") != "0" for s in suites) == len(planted)


def test_two_shards_cover_the_matrix_once(tmp_path, capsys):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("backends: [sqlite]\nnemeses: [[], [kill], [pause]]\nseeds: [1, 2, 3]\n")
    rows = []
    for shard in ("1/2", "2/2"):
        assert main(["test-all", "--matrix", str(matrix), "--dry-run", "--shard", shard]) == 0
        out = capsys.readouterr().out
        assert f"(shard {shard} of 9)" in out
        rows += [tuple(line.split()[1:3]) for line in out.splitlines() if line.startswith("sqlite")]
    assert sorted(rows) == sorted((n, str(s)) for n in ("none", "kill", "pause") for s in (1, 2, 3))


@pytest.mark.parametrize("flags, needle", [
    (["--shard", "3/2"], "--shard 3/2: i must be between 1 and n"),
    (["--shard", "half"], "--shard 'half': expected i/n"),
    (["--scheduler", "localhost:8786"], "expected tcp://host:port"),
    (["--workers", "0"], "--workers 0: expected 1 to 512"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler's cluster has its own"),
])
def test_bad_campaign_flags_are_one_line_and_254(tmp_path, capsys, flags, needle):
    code = main(["test-all", "--matrix", os.path.join(os.path.dirname(__file__), "..", "matrices", "smoke.yaml"),
                 "--store", str(tmp_path), *flags])
    assert needle in one_line_254(code, capsys.readouterr().err)


def test_an_unreachable_scheduler_is_one_line_and_254(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(fanout, "CONNECT_TIMEOUT_S", 2.0)
    port = _free_port()  # nothing listens there
    code = main(["test-all", "--matrix", os.path.join(os.path.dirname(__file__), "..", "matrices", "smoke.yaml"),
                 "--store", str(tmp_path), "--scheduler", f"tcp://127.0.0.1:{port}"])
    line = one_line_254(code, capsys.readouterr().err)
    assert f"tcp://127.0.0.1:{port}: cannot reach a Dask scheduler" in line
    assert not os.path.exists(tmp_path / "campaigns")  # nothing ran, so no campaign report


def test_a_campaign_on_a_separately_started_scheduler(tmp_path, capsys, monkeypatch):
    address_file = tmp_path / "scheduler.json"
    started = []
    try:
        started.append(_start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(address_file)], tmp_path / "scheduler.log"))
        address = _wait_for_address(address_file, started[0])
        monkeypatch.setattr(fanout, "NO_WORKER_S", 2.0)  # a cluster without workers: an error, not a hang
        assert list(fanout.fan_out(abs, [-1], scheduler=address)) == [
            (-1, fanout.ItemError("no cluster worker for 2 s: never ran"))]
        monkeypatch.undo()
        started.append(_start([DASK, "worker", address, "--host", "127.0.0.1", "--nworkers", "1",
                               "--nthreads", "1", "--no-dashboard"], tmp_path / "worker.log"))
        one_seed = TINY.replace("backends: [sqlite, {backend: python, factory: \"chaos.testing.planted:open_takeover\"}]",
                                "backends: [sqlite]").replace("seeds: [1, 2]", "seeds: [5]")
        code, out, summary = _campaign(tmp_path, capsys, one_seed, "--scheduler", address)
        records = _records(summary)
        assert [(r["backend"], r["seed"]) for r in records] == [("sqlite", 5)], out
        assert records[0]["verdict"] in ("valid", "unknown") and os.path.isdir(records[0]["run_dir"])
        assert code in (0, 2) and f"Dask scheduler {address}" in open(summary).read()
    finally:
        _stop(started)


def _start(argv: list[str], log) -> subprocess.Popen:
    with open(log, "wb") as f:  # bounded: a short test writes little; read only on failure
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_address(path, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dask scheduler exited {proc.returncode}")
        try:
            return json.loads(path.read_text())["address"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    raise AssertionError("dask scheduler wrote no address file within 120 s")


def _stop(started: list[subprocess.Popen]) -> None:
    """Each process this test started leads its own session: stop that group, then reap."""
    for proc in reversed(started):
        tree = [psutil.Process(proc.pid)] if proc.poll() is None else []
        try:
            tree += psutil.Process(proc.pid).children(recursive=True) if tree else []
        except psutil.Error:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            _, alive = psutil.wait_procs(tree, timeout=15)
            if not alive:
                break
        proc.wait(timeout=30)
        assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
