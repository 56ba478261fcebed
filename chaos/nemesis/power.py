"""``power-loss``: the machine of a file-backed store loses power.

Every worker host (and any program it runs: git, an external CLI) is exec'd
with the power-loss shim preloaded (``chaos.faults.powerloss``), which
journals every change to the store's files that a power loss could still
undo. A ``power-loss`` op:

1. stops every slot from starting a new host (the machine is off);
2. cuts the power mid-write: the shim makes the first worker that makes its
   k-th journaled change (k drawn, 1-24, so the cut falls anywhere inside a
   transaction) SIGSTOP itself, at most 3 s are waited for it; then every
   worker tree is stopped, SIGKILLed and reaped (their in-flight ops end
   ``info``). A power-off between two transactions would lose nothing;
3. undoes every change no completed fsync covers (``mode`` ``drop``: all of
   them; ``torn``: seeded sector tearing, see the mechanism);
4. powers on: slots start fresh hosts on their next op (recovery, e.g.
   SQLite's hot-journal rollback, is the backend's own business).

Evidence (``took_effect``): every killed PID is gone and at least one
uncovered change was really undone (``undone`` > 0); a power-off that found
everything synced is recorded with ``took_effect: false``.

Which files: the target's durable store only (``durable_prefix``): the SQLite
file and its journal, the Git-journal repository, an external backend's
ledger directory. Worker logs and the run's own files are never touched.
"""

from __future__ import annotations

import os
import time

import psutil

from chaos.faults import procs
from chaos.nemesis import FaultCycle, Package

MODES = ("drop", "torn")


def durable_prefix(target) -> str:
    """The path prefix of everything the target's store writes durably."""
    spec = target.spec
    if spec.get("backend") in ("sqlite", "python"):
        return spec["path"]                      # claims.db, claims.db-journal
    if spec.get("backend") in ("gitjournal", "external"):
        # the repository / ledger root that holds every ledger (objects, refs, journals, item files)
        first = spec["ledgers"][0] if isinstance(spec["ledgers"], list) else next(iter(spec["ledgers"].values()))
        return os.path.dirname(first) + os.sep
    raise RuntimeError(f"power-loss needs a file-backed store, not {spec.get('backend')!r}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


#: how long a power-off waits for a worker to stop itself mid-write
WAIT_FOR_WRITE_S = 3.0


def _self_stopped(env) -> list[int]:
    """Worker processes (hosts and their children) stopped, but not by the pause nemesis."""
    paused = set(env.paused.values())
    out = []
    for slot in env.slots:
        if slot.pid is None or slot.pid in paused:
            continue
        for pid in procs.ProcessTree(slot.pid).pids():
            try:
                if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                    out.append(pid)
            except psutil.NoSuchProcess:
                pass
    return out


def power_off(env, mode: str, seed: int, after_changes: int) -> dict:
    """Steps 1-4 above; returns the op's value."""
    power = env.power
    if power is None:
        raise RuntimeError("workers were not started with the power-loss shim")
    for slot in env.slots:
        slot.powered.clear()
    killed: list[int] = []
    try:
        power.halt_after(after_changes)
        deadline = time.monotonic() + WAIT_FOR_WRITE_S
        while not (stopped := _self_stopped(env)) and time.monotonic() < deadline:
            time.sleep(0.005)
        for slot in env.slots:       # the instant of the power cut: nothing runs any more
            if slot.pid is not None:
                procs.ProcessTree(slot.pid).pause()
        power.unhalt()
        for slot in env.slots:
            tree = procs.ProcessTree(slot.pid).pids() if slot.pid is not None else []
            pid = slot.kill()
            if pid is not None:
                killed += [pid, *tree]
        env.paused.clear()          # a paused host is dead now; its resume has nothing left to do
        alive = [p for p in killed if not _gone(p)]
        if alive:
            return {"killed": killed, "alive": alive, "took_effect": False,
                    "error": "processes survived the power-off; files not touched"}
        stats = power.power_off(mode, seed)
    finally:
        power.unhalt()
        for slot in env.slots:
            slot.powered.set()
    return {"killed": sorted(set(killed)), "cut_mid_write": stopped, **stats, "took_effect": stats["undone"] > 0}


def package(opts: dict) -> Package:
    mode = opts.get("power_loss_mode", "drop")
    if mode not in (*MODES, "mixed"):
        raise ValueError(f"power_loss_mode {mode!r}: expected drop, torn or mixed")

    def draw(s, workers):
        m = mode
        if m == "mixed":
            m, s = s.choice(MODES)
        seed, s = s.randint(0, 2**31 - 1)
        k, s = s.randint(1, 24)
        return {"targets": "all", "mode": m, "seed": seed, "after_changes": k}, s

    def execute(env, op):
        v = op["value"]
        return power_off(env, v["mode"], v["seed"], v["after_changes"])

    def final(env):
        for slot in env.slots:
            slot.powered.set()
        return {"took_effect": True}

    gen = FaultCycle("power-loss", draw, opts.get("workers", 1), gap_ms=opts.get("power_loss_gap_ms", (1500, 4000)))
    return Package("power-loss", gen, execute, final, "workers", requires=("powerloss",))
