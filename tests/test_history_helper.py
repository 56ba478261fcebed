"""``History.read(jobs=2)``: a helper process does the raw-reply checks while
this one builds the ops; the findings, the ops and the verdicts are those of
the one-process read, also when the helper fails or is never asked."""

from __future__ import annotations

import base64
import copy
import gc
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from test_history import _write
from test_invariants_support import simulate

import checkers.history as history_mod
from checkers import default_checkers, run_checkers
from checkers.history import History


def _planted(seed: int) -> tuple[list[dict], dict]:
    """A simulated history with raw-reply findings planted: every accepted
    publish carries a candidate whose id is not the item's (digest matching),
    every second ok read reply lacks ``contract_version``, and the first
    decided acquire asked for a lease out of range (a noncanonical request)."""
    history, ctx = simulate(seed, n_workers=4, steps=300, n_items=2, p_lost=0.1)
    history = copy.deepcopy(history)
    invokes: dict = {}
    reads = 0
    acquires: list = []
    for rec in history:
        if rec.get("process") == "nemesis":
            continue
        if rec["type"] == "invoke":
            invokes[rec["process"]] = rec
            continue
        inv = invokes.pop(rec["process"], None)
        env = (rec.get("value") or {}).get("envelope")
        if inv is None or not isinstance(env, dict):
            continue
        if rec["f"] == "publish" and rec["type"] == "ok":
            data = b"---\nschema_version: 1\nid: wb_not_this_item\n---\nbody\n"
            inv["value"]["candidate_source_base64"] = base64.b64encode(data).decode()
            inv["value"]["candidate_sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
        elif rec["f"] == "acquire" and rec["type"] in ("ok", "fail") and not acquires:
            acquires.append(inv)
            inv["value"]["lease_duration_ms"] = 86_400_001
        elif rec["f"] == "read" and rec["type"] == "ok":
            reads += 1
            if reads % 2:
                env.pop("contract_version", None)
    return history, ctx


def _findings(h: History):
    return ([(op.cp, problems) for op, problems in h.envelope_problems],
            [(op.cp, kind, data) for op, kind, data in h.request_problems])


@pytest.fixture
def helper_always(monkeypatch):
    monkeypatch.setattr(history_mod, "HELPER_MIN_BYTES", 0)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_helper_finds_what_one_process_finds(tmp_path, helper_always, seed):
    records, ctx = _planted(seed)
    path = _write(tmp_path, records, tail='{"index": 9999, "proc')  # a torn tail too
    one, two = History.read(path, jobs=1), History.read(path, jobs=2)
    assert two._pending is not None  # the helper ran
    shapes, requests = _findings(one)
    assert shapes and requests  # the planted findings are there (the test can fail)
    assert {kind for _, kind, _ in requests} == {"invalid-candidate-accepted", "noncanonical-request-decided"}
    helper_shapes, helper_requests = _findings(two)
    assert helper_shapes == shapes, (len(helper_shapes), len(shapes), two.helper)
    assert helper_requests == requests, (len(helper_requests), len(requests), two.helper)
    of_shapes, of_requests = _findings(History.of(records))
    assert (of_shapes, of_requests) == (shapes, requests), (len(of_shapes), len(shapes), len(of_requests),
                                                            len(requests))
    assert two.helper["status"] == 0 and two.helper["max_rss_kb"] > 0
    assert one.problems == two.problems and "torn last line" in one.problems[0]
    verdicts = _untimed(run_checkers(one, ctx))
    assert verdicts["requests"]["valid"] is False and verdicts["envelopes"]["valid"] is False
    assert _untimed(run_checkers(History.read(path, jobs=2), ctx)) == verdicts


def _untimed(result: dict) -> dict:
    """The checkers' results without their timings (which differ run to run)."""
    out = copy.deepcopy(result["checkers"])
    for r in out.values():
        r["stats"].pop("seconds", None)
        r["stats"].pop("cpu_seconds", None)
    return out


def test_a_failed_helper_is_replaced_by_the_same_checks_here(tmp_path, helper_always, monkeypatch):
    records, _ = _planted(3)
    path = _write(tmp_path, records)
    expected = _findings(History.read(path, jobs=1))
    monkeypatch.setattr(history_mod.sys, "executable", "/bin/false")  # the helper exits 1 at once
    h = History.read(path, jobs=2)
    assert _findings(h) == expected and h.helper["status"] == 1


def test_a_failed_helper_says_why(tmp_path, helper_always, monkeypatch):
    records, _ = _planted(3)
    path = _write(tmp_path, records)
    monkeypatch.setattr(history_mod.sys, "executable", "/bin/sh")  # sh -m checkers.history: no such script
    h = History.read(path, jobs=2)
    _findings(h)
    assert h.helper["status"] not in (0, None) and "checkers.history" in h.helper["stderr"], h.helper


def test_a_helper_never_asked_is_stopped_and_reaped_with_its_history(tmp_path, helper_always):
    records, _ = _planted(4)
    h = History.read(_write(tmp_path, records), jobs=2)
    pid = h._pending.__closure__  # noqa: B018 - the helper is reachable only through the pending call
    helper = next(c.cell_contents for c in pid if isinstance(c.cell_contents, history_mod._RawHelper))
    del h, pid
    gc.collect()
    assert helper.usage is not None  # killed (or finished) and reaped: no zombie left
    with pytest.raises(ChildProcessError):
        os.waitpid(helper.proc.pid, os.WNOHANG)


def test_small_files_and_jobs_1_read_in_one_process(tmp_path):
    records, _ = _planted(5)
    path = _write(tmp_path, records)
    assert os.path.getsize(path) < history_mod.HELPER_MIN_BYTES
    assert History.read(path, jobs=2)._pending is None and History.read(path, jobs=1)._pending is None


def test_chaos_check_default_and_jobs_1_print_the_same_result(tmp_path):
    records, ctx = _planted(6)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write(run_dir, records)
    with open(run_dir / "results.json", "w") as f:
        json.dump({"ctx": ctx}, f, default=str)
    env = dict(os.environ, CLAIM_CHAOS_HELPER_MIN_BYTES="0")
    outs = []
    for extra in ([], ["--jobs", "1"]):
        p = subprocess.run([sys.executable, "-m", "chaos.cli", "check", str(run_dir), "--json", *extra],
                           capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 1, p.stderr  # invalid: the planted findings
        outs.append(json.loads(p.stdout))
    default, one = outs
    assert default["processes"]["helper"]["status"] == 0 and "processes" not in one
    assert _untimed(default) == _untimed(one) and default["checkers"]["requests"]["valid"] is False


def test_the_helper_dies_with_a_killed_parent():
    """A SIGKILLed reader leaves no helper behind: the helper asks for
    SIGKILL when its parent dies (``_die_with``); without that it would sleep
    on here for a minute."""
    import psutil

    helper = ("import os, sys, time; from checkers.history import _die_with; "
              "_die_with(int(sys.argv[1])); time.sleep(60)")
    parent = ("import os, subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', {helper!r}, str(os.getpid())]); "
              "print(p.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    time.sleep(1.0)  # the helper has asked for it by now (it is still sleeping either way)
    assert psutil.pid_exists(pid)
    proc.kill()
    proc.wait()
    try:
        psutil.Process(pid).wait(timeout=20)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        os.kill(pid, 9)
        raise AssertionError("the helper outlived its killed parent")
