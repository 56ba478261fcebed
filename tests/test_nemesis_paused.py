"""No nemesis step blocks on a stopped worker, and every step has a bounded time.

Regression for ``chaos run --seed 2`` (all nemeses): the pause nemesis
SIGSTOPped worker 0, the restart nemesis then targeted the same stopped worker
and blocked the single nemesis thread, so the resume, kill, clock and fsync
ops scheduled after it never ran.
"""

from __future__ import annotations

import queue
import threading
import time

import psutil
import pytest

from chaos.driver import NemesisExecutor
from chaos.nemesis import NEMESES, Package, compose_packages
from proc_status import status, wait_running
from slot_env import slot_env


@pytest.fixture
def env(tmp_path):
    env, history = slot_env(tmp_path, ["pause", "restart", "kill", "lost-reply"])
    yield env
    for s in env.slots:
        s.kill()
    history.close()


def test_pause_then_restart_of_the_same_worker_skips_it_and_the_schedule_goes_on(env):
    _, table, _ = compose_packages(["pause", "restart", "kill", "lost-reply"], {"workers": 2, "backend": "sqlite"})
    ex = NemesisExecutor(table, env, queue.Queue(), step_timeout=20.0)
    try:
        pid0 = env.slots[0].ensure_started().pid
        pid1 = env.slots[1].ensure_started().pid
        paused = ex.run_op({"f": "pause", "value": {"targets": [0]}})
        assert paused["type"] == "ok" and paused["value"]["took_effect"] and status(pid0) == psutil.STATUS_STOPPED

        # the old hang: restart and lost-reply on the stopped worker 0 (and one live worker)
        restart = ex.run_op({"f": "restart", "value": {"targets": [0, 1]}})
        assert restart["type"] == "ok" and "timed_out" not in restart["value"]
        skipped, live = restart["value"]["restarted"]
        assert skipped["slot"] == 0 and not skipped["restarted"] and "paused" in skipped["skipped"]
        assert live["slot"] == 1 and live["restarted"] and live["pid"] == pid1
        assert restart["value"]["took_effect"]
        lost = ex.run_op({"f": "lost-reply", "value": {"targets": [0], "op_class": "publish"}})
        assert lost["type"] == "ok" and lost["value"]["armed"] == [
            {"slot": 0, "armed": False, "skipped": f"worker {pid0} is paused by the pause nemesis"}]
        assert status(pid0) == psutil.STATUS_STOPPED   # nothing resumed it behind the schedule's back

        # the faults scheduled after it still fire and take effect
        resumed = ex.run_op({"f": "resume", "value": {"targets": [0]}})
        assert resumed["value"]["resumed"] == [{"slot": 0, "pid": pid0}] and status(pid0) != psutil.STATUS_STOPPED
        again = ex.run_op({"f": "restart", "value": {"targets": [0]}})
        assert again["value"]["restarted"][0]["restarted"] and again["value"]["took_effect"]
        killed = ex.run_op({"f": "kill", "value": {"targets": [0]}})
        assert killed["value"]["took_effect"] and killed["value"]["killed"][0]["pid"] == pid0
        assert status(pid0) == "gone"
        cov = env.coverage.to_json()
        assert cov["pause"]["took_effect"] == 1 and cov["restart"]["took_effect"] == 2 and cov["kill"]["took_effect"] == 1
    finally:
        NEMESES["pause"]({"workers": 2}).final(env)
        ex.stop()


def test_the_pause_nemesis_resume_leaves_a_worker_another_fault_holds(env):
    """A worker the pause nemesis paused (twice over: one resume ends it), and another fault holds too (an
    in-call freeze of its call, the power cut's pause): the nemesis's resume leaves it stopped and says so;
    the other fault's heal continues it. The old resume continued it behind the other fault's back."""
    from chaos.faults import procs

    _, table, _ = compose_packages(["pause"], {"workers": 2, "backend": "sqlite"})
    ex = NemesisExecutor(table, env, queue.Queue(), step_timeout=20.0)
    try:
        pid0 = env.slots[0].ensure_started().pid
        for _ in range(2):   # paused twice before a resume: still one hold of the nemesis's
            assert ex.run_op({"f": "pause", "value": {"targets": [0]}})["value"]["took_effect"]
        other = procs.ProcessTree(pid0)
        other.pause()                                   # the other fault: finds it stopped, holds it too
        resumed = ex.run_op({"f": "resume", "value": {"targets": [0]}})
        assert resumed["value"]["resumed"] == [{"slot": 0, "pid": pid0, "still_held_by_another_fault": [pid0]}]
        assert status(pid0) == psutil.STATUS_STOPPED
        assert other.resume() == [pid0]
        assert wait_running(pid0)
    finally:
        NEMESES["pause"]({"workers": 2}).final(env)
        ex.stop()


def test_a_stuck_step_is_abandoned_after_its_bound_and_the_next_step_runs(env):
    release = threading.Event()

    def execute(_env, op):
        if op["f"] == "stuck":
            release.wait(30)
        return {"took_effect": True}

    pkg = Package("stuck", None, execute, lambda _env: {"took_effect": True}, heals=("after",))
    ex = NemesisExecutor({"stuck": pkg, "after": pkg}, env, queue.Queue(), step_timeout=0.3)
    try:
        stuck = ex.run_op({"f": "stuck", "value": {}})
        assert stuck["type"] == "info" and stuck["value"]["timed_out"] and not stuck["value"]["took_effect"]
        assert "did not finish within 0.3 s" in stuck["value"]["error"]
        after = ex.run_op({"f": "after", "value": {}})
        assert after["type"] == "ok" and after["value"]["took_effect"]
    finally:
        release.set()
        ex.stop()


def test_a_restart_of_slots_without_a_live_worker_gives_up_at_once_within_the_step_bound(env):
    # expiry-inclusive, CLI seed 3: a restart of two slots that had no live worker waited 3 x 2 s for each
    # and outlasted the 10-s step bound twice (the schedule behind it, an fsync heal among it, waited)
    _, table, _ = compose_packages(["restart"], {"workers": 2, "backend": "sqlite"})
    ex = NemesisExecutor(table, env, queue.Queue())
    t0 = time.monotonic()
    restart = ex.run_op({"f": "restart", "value": {"targets": [0, 1]}})
    assert restart["type"] == "ok" and restart["value"] == {"restarted": [
        {"slot": 0, "restarted": False, "errors": ["no live worker"]},
        {"slot": 1, "restarted": False, "errors": ["no live worker"]}], "took_effect": False}
    assert time.monotonic() - t0 < 6.0   # one 2-s wait for a successor each, not three
