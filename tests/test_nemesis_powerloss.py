"""The power-loss nemesis in real ``chaos run``s: the correct SQLite backend
stays valid, the ``synchronous=OFF`` variant is invalid and the durability
checker names it; every power-off cut the power mid-write and undid
something (its evidence)."""

from __future__ import annotations

import json
import sys

import psutil
import pytest

from chaos.commands.test_all import RunRequest, run_one
from chaos.testing.sync_variants import VARIANTS


def _run(tmp_path, seed: int, factory: str | None = None, backend: str = "sqlite", extra=(), time_limit=6):
    out = run_one(RunRequest(backend=backend, nemesis=["power-loss"], seed=seed, time_limit=time_limit, workers=4,
                             store=str(tmp_path / f"s{seed}"), factory=factory,
                             # the timed nemesis (its cut mid-write, its evidence); the deterministic
                             # mode's exact power cut: tests/test_deterministic_faults.py
                             extra_args=["--no-report", "--timed", *extra]))   # results.json is what is read
    offs = [json.loads(line) for line in open(f"{out.run_dir}/history.jsonl")]
    offs = [o for o in offs if o.get("f") == "power-loss" and o["type"] != "invoke"]
    return out, offs


def test_correct_sqlite_stays_valid_and_every_power_off_is_evidenced(tmp_path):
    # 10 s: on a loaded machine (load 18 on 2 cores) every host boot after a power-off takes about a
    # second, and in 6 s no publish completed between the power-offs (the run is then rightly unknown)
    out, offs = _run(tmp_path, 1, time_limit=10)
    assert out.results["verdict"] == "valid", out.results["notes"]
    values = [o["value"] for o in offs]
    assert offs and all(o["type"] == "ok" and "cut_mid_write" in o["value"] for o in offs), values
    assert any(v["cut_mid_write"] for v in values), values     # the cut mid-write works
    # a power-off that found no worker writing (all still booting on a loaded machine) says so
    assert all(v["cut_mid_write"] or (v["no_cut"] and v["waited_for_cut_s"] >= 3) for v in values), values
    cov = out.results["fault_coverage"]["power-loss"]
    assert cov["took_effect"] >= 1 and cov["took_effect"] == sum(o["value"]["took_effect"] for o in offs)


def _sync_off_caught(tmp_path, seed: int) -> None:
    out, offs = _run(tmp_path, seed, factory=VARIANTS["sync-off"][0])
    assert out.results["verdict"] == "invalid"
    durability = out.results["checkers"]["durability"]
    assert durability["valid"] is False, durability
    assert any(o["value"]["undone_bytes"] > 0 for o in offs)


def test_sync_off_variant_is_invalid_and_named_by_durability(tmp_path):
    _sync_off_caught(tmp_path, 1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_sync_off_variant_is_caught_in_more_seeds(tmp_path, seed):
    _sync_off_caught(tmp_path, seed)


# --------------------------------------------------------------------------- the power cut on a loaded machine


@pytest.fixture
def power_env(tmp_path):
    """Two real worker slots on one sqlite store, started under the power-loss shim."""
    from chaos.faults.powerloss import PowerLoss
    from slot_env import slot_env

    power = PowerLoss(str(tmp_path), prefix=str(tmp_path / "c.db"))
    env, history = slot_env(tmp_path, ["power-loss"], env_for=lambda _t: power.env())
    env.power = power
    yield env
    for s in env.slots:
        s.kill()
    history.close()
    power.cleanup()


def test_a_power_off_does_not_wait_for_a_host_still_starting(power_env, monkeypatch):
    """A host start holds its slot until the host is ready (seconds on a loaded
    machine): the power-off used to block on it, outlast the nemesis step and end
    ``info`` without its evidence. The starting host is part of the machine: it
    is stopped and killed with the others, and its start fails at once."""
    import queue
    import threading
    import time

    from chaos.driver import NemesisExecutor
    from chaos.errors import SetupFailed
    from chaos.nemesis import compose_packages
    from chaos.nemesis import power as power_mod

    monkeypatch.setattr(power_mod, "WAIT_FOR_WRITE_S", 0.2)   # nothing writes here: no cut to wait for
    env = power_env
    pid0 = env.slots[0].ensure_started().pid
    slow = env.slots[1]
    slow.launcher = lambda _gen: ["sh", "-c", 'sleep 60; exec "$0" "$@"', sys.executable]   # a 60-s start
    failed = []

    def start():
        try:
            slow.ensure_started()
        except SetupFailed as e:
            failed.append(str(e))

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    deadline = time.monotonic() + 10
    while not power_mod._starting(env) and time.monotonic() < deadline:
        time.sleep(0.01)
    starting = [c.pid for c in power_mod._starting(env)]
    assert starting, "the slow host never began to start"
    _, table, _ = compose_packages(["power-loss"], {"workers": 2, "backend": "sqlite"})
    ex = NemesisExecutor(table, env, queue.Queue(), step_timeout=30.0)
    try:
        t = time.monotonic()
        off = ex.run_op({"f": "power-loss", "value": {"mode": "drop", "seed": 1, "after_changes": 1}})
        took = time.monotonic() - t
    finally:
        ex.stop()
    assert off["type"] == "ok" and "timed_out" not in off["value"], off
    assert took < 20, f"the power-off took {took:.1f} s: it waited for the starting host"
    assert off["value"]["starting_killed"] == 1 and set(starting) | {pid0} <= set(off["value"]["killed"])
    assert "cut_mid_write" in off["value"] and "waited_for_cut_s" in off["value"]
    starter.join(10)
    assert failed and not starter.is_alive() and slow.client is None
    assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE
               for p in [pid0, *starting])


def test_a_host_stopped_by_another_fault_is_not_taken_for_the_cut(power_env, monkeypatch):
    """An in-call freeze at write-release stops its host too (after its transaction, nothing
    uncovered): the power-off took that stop for its cut, found nothing to undo, and a CI run ended
    unknown with "power-loss never took effect". Only a halt the shim logged is the cut."""
    import queue

    from chaos.driver import NemesisExecutor
    from chaos.faults import procs
    from chaos.nemesis import compose_packages
    from chaos.nemesis import power as power_mod

    monkeypatch.setattr(power_mod, "WAIT_FOR_WRITE_S", 0.2)   # nothing writes here: no cut to wait for
    env = power_env
    pid0 = env.slots[0].ensure_started().pid
    procs.ProcessTree(pid0).pause()                           # as chaos.faults.incall freezes a host
    _, table, _ = compose_packages(["power-loss"], {"workers": 2, "backend": "sqlite"})
    ex = NemesisExecutor(table, env, queue.Queue(), step_timeout=30.0)
    try:
        off = ex.run_op({"f": "power-loss", "value": {"mode": "drop", "seed": 1, "after_changes": 1}})
    finally:
        ex.stop()
    assert off["type"] == "ok", off
    assert off["value"]["cut_mid_write"] == [] and off["value"]["no_cut"] == "no journaled change for 0.2 s", off
    assert pid0 in off["value"]["killed"] and off["value"]["took_effect"] is False


def test_the_wait_for_a_mid_write_cut_lasts_while_the_store_is_written(monkeypatch):
    """Bounded by evidence: the wait goes on while the undo log grows (a loaded
    machine writes slowly), ends once it stops growing, and never passes the cap."""
    import time
    from types import SimpleNamespace

    from chaos.nemesis import power as power_mod

    monkeypatch.setattr(power_mod, "WAIT_FOR_WRITE_S", 0.3)
    monkeypatch.setattr(power_mod, "MAX_WAIT_FOR_WRITE_S", 1.5)

    def env_writing_for(seconds):
        t0 = time.monotonic()
        # the undo log: a record more every 0.1 s for ``seconds``, and no one halts
        log = SimpleNamespace(refresh=lambda: SimpleNamespace(halted=[],
                                                              records=int(min(time.monotonic() - t0, seconds) * 10)))
        return SimpleNamespace(slots=[], paused={}, power=log)

    idle, writing, busy = (power_mod._wait_for_cut(env_writing_for(s)) for s in (0, 0.6, 60))
    assert idle[1] == pytest.approx(0.3, abs=0.15) and idle[2] == "no journaled change for 0.3 s"
    assert writing[1] == pytest.approx(0.9, abs=0.2) and writing[2] == "no journaled change for 0.3 s"
    assert busy[1] == pytest.approx(1.5, abs=0.15) and busy[2] == "no cut within 1.5 s of writing"
