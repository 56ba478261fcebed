"""``power-loss``: the machine of a file-backed store loses power.

Every worker host (and any program it runs: git, an external CLI) is exec'd
with the power-loss shim preloaded (``chaos.faults.powerloss``), which
journals every change to the store's files that a power loss could still
undo. A ``power-loss`` op:

1. stops every slot from starting a new host (the machine is off);
2. cuts the power mid-write: the shim makes the first worker that makes its
   k-th journaled change (k drawn, 1-24, so the cut falls anywhere inside a
   transaction) write a halt record to the undo log and SIGSTOP the thread
   that made the change. That record is waited for while the workers keep
   journaling (a loaded machine writes slowly, not never): until 3 s pass
   without a new change, 6 s at most. Then every worker tree is stopped,
   SIGKILLed and reaped (their in-flight ops end ``info``), hosts still
   starting too: a start holds its slot until the host is ready, seconds on
   a loaded machine, so waiting for it outlasted the nemesis step (which then
   ended ``info`` without evidence). A power-off between two transactions
   would lose nothing;
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
from chaos.nemesis.base import FaultCycle, Package

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


#: a power-off waits for a worker to stop itself mid-write while the store's undo log
#: keeps growing, until it has not grown for WAIT_FOR_WRITE_S, and never longer than
#: MAX_WAIT_FOR_WRITE_S (the nemesis step itself is bounded: ``chaos.driver.STEP_TIMEOUT_S``)
WAIT_FOR_WRITE_S = 3.0
MAX_WAIT_FOR_WRITE_S = 6.0


def _starting(env) -> list:
    """The hosts of the run's slots still starting, not yet their slot's client (a start
    holds its slot's lock until the host says it is ready: seconds on a loaded machine)."""
    from chaos.host.client import live_clients

    specs, current = [slot.spec for slot in env.slots], {slot.pid for slot in env.slots}
    return [c for c in live_clients() if c.pid not in current and any(c.spec is s for s in specs)]


def _hosts(env) -> list[int]:
    """The root PID of every host of the run's slots, those still starting too."""
    return [slot.pid for slot in env.slots if slot.pid is not None] + [c.pid for c in _starting(env)]


def _wait_for_cut(env) -> tuple[list[int], float, str | None]:
    """(the PIDs that stopped themselves for the cut, seconds waited, why no cut came), bounded by
    evidence: the undo log's growth. A halted process says so in the log before it stops: a process
    stopped by another fault (an in-call freeze at write-release stops itself too) is not the cut."""
    start = time.monotonic()
    state = env.power.refresh()   # one read of the log a look: its halts and its growth
    seen, progress = state.records, start
    while True:
        now = time.monotonic()
        if state.halted:
            return sorted(set(state.halted)), round(now - start, 3), None
        if now - progress >= WAIT_FOR_WRITE_S:
            return [], round(now - start, 3), f"no journaled change for {WAIT_FOR_WRITE_S:g} s"
        if now - start >= MAX_WAIT_FOR_WRITE_S:
            return [], round(now - start, 3), f"no cut within {MAX_WAIT_FOR_WRITE_S:g} s of writing"
        time.sleep(0.005)
        state = env.power.refresh()
        if state.records != seen:
            seen, progress = state.records, time.monotonic()


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
        stopped, waited, no_cut = _wait_for_cut(env)
        for root in _hosts(env):    # the instant of the power cut: nothing runs any more
            procs.ProcessTree(root).pause()
        power.unhalt()
        starting = _starting(env)
        for host in starting:       # its start fails at once (SetupFailed: the op ends info) and frees the slot
            tree = procs.ProcessTree(host.pid, popen=host.proc)
            killed += [host.pid, *tree.pids()]
            tree.kill()
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
    return {"killed": sorted(set(killed)), "cut_mid_write": stopped, "waited_for_cut_s": waited,
            **({"no_cut": no_cut} if no_cut else {}), "starting_killed": len(starting), **stats,
            "took_effect": stats["undone"] > 0}


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
