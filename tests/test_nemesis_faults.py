"""Each nemesis on real worker processes: the fault really took effect."""

from __future__ import annotations

import os
import queue
import time

import psutil
import pytest

from backends.contract import parse_instant
from chaos.driver import FaultEnv
from chaos.faults.failsync import FsyncFault
from chaos.faults.faketime import ClockFault
from chaos.history_store import HistoryWriter
from chaos.nemesis import NEMESES, Coverage
from chaos.worker import Slot
from slot_env import seeded_sqlite


@pytest.fixture
def world(tmp_path):
    return seeded_sqlite(tmp_path)


def make_env(tmp_path, spec, clock=False, fsync=False):
    (tmp_path / "logs").mkdir(exist_ok=True)
    clocks = {0: ClockFault(str(tmp_path / "clock-0"))} if clock else {}
    fs = FsyncFault(str(tmp_path / "failsync")) if fsync else None

    def env_for(t):
        env, libs = {}, []
        for fault in ([clocks[t]] if t in clocks else []) + ([fs] if fs else []):
            env.update(fault.env())
            libs.append(fault.library)
        if libs:
            env["LD_PRELOAD"] = " ".join(libs)
        return env

    slot = Slot(0, spec, env_for, str(tmp_path / "logs"), queue.Queue(), 10.0, lambda pid: None)
    history = HistoryWriter(str(tmp_path / "history.jsonl"))
    env = FaultEnv([slot], clocks, fs, Coverage([]), history, time.monotonic_ns())
    return env, slot


def read_op(world, process=0):
    ns, item = world.tuples[0]
    return {"process": process, "f": "read", "value": {"ledger_namespace": ns, "item_id": item}}


def test_clock_moves_the_workers_wall_clock_back(tmp_path, world):
    spec, w = world
    env, slot = make_env(tmp_path, spec, clock=True)
    try:
        slot.ensure_started()
        pkg = NEMESES["clock"]({"workers": 1})
        value = pkg.execute(env, {"f": "clock", "value": {"targets": [0], "mode": "backward", "offset_s": -3600}})
        # evidence is the worker's own `now`, not a probe process
        assert value["took_effect"] and value["clocks"][0]["preloaded"] and value["runner_drift_ms"] is not None
        assert abs(value["clocks"][0]["worker_offsets_ms"][0] + 3_600_000) < 5000
        assert abs(slot.now()["wall_ms"] - time.time() * 1000 + 3_600_000) < 5000
        # the backend in the worker decides with its own (skewed) physical clock: no floor yet
        done = slot.run_op(read_op(w))
        observed = parse_instant(done["value"]["envelope"]["result"]["read_back"]["observed_at"])
        assert abs((time.time() * 1000 - observed) - 3_600_000) < 60_000
        pkg.final(env)
        done = slot.run_op(read_op(w))
        observed = parse_instant(done["value"]["envelope"]["result"]["read_back"]["observed_at"])
        assert abs(time.time() * 1000 - observed) < 60_000
    finally:
        slot.kill()


def test_fsync_shim_makes_a_commit_fail_with_disk_io_error(tmp_path, world):
    spec, w = world
    env, slot = make_env(tmp_path, spec, fsync=True)
    try:
        slot.ensure_started()
        pkg = NEMESES["fsync"]({"workers": 1})
        pkg.execute(env, {"f": "fsync", "value": {"targets": "all"}})
        ns, item = w.tuples[0]
        op = {"process": 0, "f": "acquire", "value": {"ledger_namespace": ns, "item_id": item, "owner_id": "a-1",
                                                      "lease_duration_ms": 1000,
                                                      "expected": {"last_epoch": "0", "active": None}}}
        done = slot.run_op(op)
        env.history.append(dict(done, time=env.now_ns()))
        assert done["type"] == "info"
        if "value" in done:
            assert done["value"]["exit"] == 6
        heal = pkg.execute(env, {"f": "fsync-heal", "value": {"targets": "all"}})
        assert heal["took_effect"] and heal["uncertain_ops"] == 1
        assert not os.path.exists(tmp_path / "failsync")
        logs = "".join(open(tmp_path / "logs" / f).read() for f in os.listdir(tmp_path / "logs"))
        assert "disk I/O error" in logs or done.get("value", {}).get("exit") == 6
    finally:
        slot.kill()


def test_kill_leaves_the_worker_gone_and_reaped(tmp_path, world):
    spec, w = world
    env, slot = make_env(tmp_path, spec)
    slot.ensure_started()
    pid = slot.pid
    value = NEMESES["kill"]({"workers": 1}).execute(env, {"f": "kill", "value": {"targets": [0]}})
    assert value["took_effect"] and value["killed"][0]["pid"] == pid
    assert not psutil.pid_exists(pid)  # reaped, not a zombie
    assert slot.run_op(read_op(w, 1))["type"] == "ok" and slot.pid != pid  # a fresh worker serves
    slot.kill()


def test_pause_stops_and_resume_continues(tmp_path, world):
    spec, w = world
    env, slot = make_env(tmp_path, spec)
    slot.ensure_started()
    pkg = NEMESES["pause"]({"workers": 1})
    try:
        assert pkg.execute(env, {"f": "pause", "value": {"targets": [0]}})["took_effect"]
        assert psutil.Process(slot.pid).status() == psutil.STATUS_STOPPED
        pkg.execute(env, {"f": "resume", "value": {"targets": [0]}})
        assert psutil.Process(slot.pid).status() != psutil.STATUS_STOPPED
        assert slot.run_op(read_op(w))["type"] == "ok"
    finally:
        slot.kill()


def test_lost_reply_commits_then_the_worker_dies(tmp_path, world):
    spec, w = world
    env, slot = make_env(tmp_path, spec)
    pkg = NEMESES["lost-reply"]({"workers": 1})
    value = pkg.execute(env, {"f": "lost-reply", "value": {"targets": [0], "op_class": "claim"}})
    assert value["armed"][0]["armed"]
    pid = slot.pid
    ns, item = w.tuples[0]
    done = slot.run_op({"process": 0, "f": "acquire", "value": {
        "ledger_namespace": ns, "item_id": item, "owner_id": "a-1", "lease_duration_ms": 60000,
        "expected": {"last_epoch": "0", "active": None}}})
    assert done["type"] == "info" and not psutil.pid_exists(pid)
    assert slot.exited_after_commit == 1
    after = slot.run_op(read_op(w, 1))  # the commit happened although the reply was lost
    assert after["value"]["envelope"]["result"]["read_back"]["last_epoch"] == "1"
    slot.kill()
