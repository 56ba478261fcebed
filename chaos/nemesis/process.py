"""Process faults on worker hosts: kill (SIGKILL + reap, a fresh worker on the
next op), pause (SIGSTOP ... SIGCONT, the paused-writer case) and restart
(the host drops its process state and reopens the store).

Evidence: after ``kill`` the PID is reaped and gone; after ``pause`` psutil
reports the process ``stopped``; ``restart`` took effect when the host
answered the restart command (or, without that command, a new PID serves).
"""

from __future__ import annotations

import psutil

from chaos.faults import procs
from chaos.nemesis import FaultCycle, Package, draw_targets


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _draw_one(s, workers):
    targets, s = draw_targets(s, workers, most=max(1, workers // 3))
    return {"targets": targets}, s


def kill_package(opts: dict) -> Package:
    def execute(env, op):
        killed = []
        for t in op["value"]["targets"]:
            pid = env.slots[t].kill()
            if pid is not None:
                killed.append({"slot": t, "pid": pid, "gone": _gone(pid)})
        return {"killed": killed, "took_effect": any(k["gone"] for k in killed)}

    gen = FaultCycle("kill", _draw_one, opts.get("workers", 1), gap_ms=opts.get("kill_gap_ms", (2000, 6000)))
    return Package("kill", gen, execute, lambda env: {"took_effect": True}, "workers")


def pause_package(opts: dict) -> Package:
    def execute(env, op):
        out = []
        if op["value"].get("at") == "publish":  # paused writer: park the next publish after validation
            for t in op["value"]["targets"]:
                env.slots[t].park_publish_ms = op["value"]["hold_ms"]
            return {"parking": op["value"]["targets"], "took_effect": None}
        for t in op["value"]["targets"]:
            pid = env.slots[t].pid
            if pid is None:
                continue
            procs.ProcessTree(pid).pause()
            env.paused[t] = pid
            try:
                stopped = psutil.Process(pid).status() == psutil.STATUS_STOPPED
            except psutil.NoSuchProcess:
                stopped = False
            out.append({"slot": t, "pid": pid, "stopped": stopped})
        return {"paused": out, "took_effect": any(p["stopped"] for p in out)}

    def resume(env, op=None):
        out = []
        for t in (op["value"]["targets"] if op else list(env.paused)):
            pid = env.paused.pop(t, None)
            if pid is not None:
                procs.ProcessTree(pid).resume()
                out.append({"slot": t, "pid": pid})
        return {"resumed": out, "took_effect": True}

    def run(env, op):
        return resume(env, op) if op["f"] == "resume" else execute(env, op)

    def draw(s, workers):
        value, s = _draw_one(s, workers)
        if opts.get("pause_at") == "publish":
            hold, s = s.randint(*opts.get("pause_ms", (1000, 4000)))
            value.update(at="publish", hold_ms=hold)
        return value, s

    gen = FaultCycle("pause", draw, opts.get("workers", 1), gap_ms=opts.get("pause_gap_ms", (1500, 5000)),
                     dur_ms=opts.get("pause_ms", (1000, 4000)), heal="resume")
    return Package("pause", gen, run, lambda env: resume(env), "workers", heals=("resume",))


def restart_package(opts: dict) -> Package:
    def execute(env, op):
        out = []
        for t in op["value"]["targets"]:
            slot = env.slots[t]
            client = slot.client
            if client is None:
                continue
            restart = getattr(client, "restart", None)
            try:
                if restart is None:
                    raise AttributeError("restart")
                restart()
                out.append({"slot": t, "pid": client.pid, "restarted": True})
            except Exception as e:  # no restart command or the host died: a fresh host instead
                old = slot.kill()
                out.append({"slot": t, "pid": old, "restarted": old is not None, "via": f"kill ({e})"})
        return {"restarted": out, "took_effect": any(r["restarted"] for r in out)}

    gen = FaultCycle("restart", _draw_one, opts.get("workers", 1), gap_ms=opts.get("restart_gap_ms", (3000, 8000)))
    return Package("restart", gen, execute, lambda env: {"took_effect": True}, "workers")
