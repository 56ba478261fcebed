"""Process faults on worker hosts: kill (SIGKILL + reap, a fresh worker on the
next op), pause (SIGSTOP ... SIGCONT, the paused-writer case) and restart
(the host drops its process state and reopens the store). A restart never
targets a stopped (paused) host: it is skipped and the history entry says why.

Evidence: after ``kill`` the PID is reaped and gone; after ``pause`` psutil
reports the process ``stopped``; ``restart`` took effect when the host
answered the restart command (or, without that command, a new PID serves).
"""

from __future__ import annotations

import threading
import time

import psutil

from chaos.faults import procs
from chaos.nemesis.base import FaultCycle, Package, draw_targets, stopped_reason


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _draw_one(s, workers):
    targets, s = draw_targets(s, workers, most=max(1, workers // 3))
    return {"targets": targets}, s


def _inside(env, kind: str, prefer: int, wait_s: float) -> int | None:
    """A slot whose op in flight is ``kind``: ``prefer`` if it is, else the
    lowest such slot; waits (polling) up to ``wait_s`` for one to start."""
    deadline = time.monotonic() + wait_s
    while True:
        busy = [t for t, slot in enumerate(env.slots) if slot.current == kind and slot.pid is not None]
        if busy:
            return prefer if prefer in busy else busy[0]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


class PublishKill:
    """One kill armed for the next publish any worker sends (``kill-call``):
    that worker kills the process serving the call at ``at`` (in [0, 1)) of
    its fastest recent call (``chaos.worker.Slot``); at most one is pending."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: dict | None = None
        self.armed = 0

    def arm(self, at: float) -> bool:
        with self._lock:
            if self._pending is not None:
                return False
            self._pending = {"kind": "kill", "at": at, "by": "kill-nemesis"}
            self.armed += 1
            return True

    def take(self) -> dict | None:
        with self._lock:
            spec, self._pending = self._pending, None
            return spec

    def disarm(self) -> None:
        self.take()


def kill_package(opts: dict) -> Package:
    """``kill_at: publish`` with ``kill_publish_share`` (0..1): that share of
    the kills aim inside a publish. A merge-coordinated publish is several
    durable steps (intent, item, final), so a kill between them is the case
    that matters. Where the backend can kill the process serving one call
    (``kill-call``), the kill is armed for the next publish any worker sends
    (``PublishKill``; the op's ``took_effect`` comes with that publish's
    completion, ``fault.by: kill-nemesis``, counted at the end of the run);
    elsewhere the drawn slot is killed if it is publishing, else one that is,
    waiting up to ``kill_wait_ms`` for one, then ``delay_ms`` into the call."""
    share = float(opts.get("kill_publish_share", 0.0)) if opts.get("kill_at") == "publish" else 0.0
    scale = float(opts.get("scale") or 1.0)
    in_call = False
    if share:
        from chaos.nemesis.base import backend_of, sut_options

        in_call = backend_of(opts).abilities(sut_options(opts)).has("kill-call")

    def arm(env, value) -> dict:
        shared = env.__dict__.setdefault("publish_kill", PublishKill())
        for slot in env.slots:
            slot.publish_kill = shared
        armed = shared.arm(value.get("at_u", 0.5))
        return {"armed": "next publish" if armed else "a publish kill is still pending", "took_effect": None}

    def execute(env, op):
        killed, value = [], op["value"]
        targets = list(value["targets"])
        if value.get("at") == "publish" and in_call:
            return arm(env, value)
        if value.get("at") == "publish":
            t = _inside(env, "publish", targets[0], min(8.0, opts.get("kill_wait_ms", 3000) * scale / 1000))
            if t is not None:  # else: no publish in flight within the wait; kill the drawn target
                time.sleep(value.get("delay_ms", 0) / 1000)
                targets = [t]
        for t in targets:
            slot = env.slots[t]
            tree = procs.ProcessTree(slot.pid).pids() if slot.pid is not None else []
            during = slot.current  # the op in flight: a kill inside a publish is what matters most
            pid = slot.kill()
            if pid is not None:
                # the tree: an external backend's CLI child dies with its worker
                killed.append({"slot": t, "pid": pid, "tree": tree, "during": during,
                               "gone": all(_gone(p) for p in [pid, *tree])})
        return {"killed": killed, "took_effect": any(k["gone"] for k in killed)}

    def draw(s, workers):
        value, s = _draw_one(s, workers)
        if share:
            u, s = s.random()
            if u < share and in_call:
                at, s = s.random()
                value.update(at="publish", at_u=round(at, 4))
            elif u < share:
                delay, s = s.randint(0, int(opts.get("kill_delay_ms", 400) * scale))
                value.update(at="publish", delay_ms=delay)
        return value, s

    def final(env):
        pending = env.__dict__.get("publish_kill")
        if pending is not None:
            pending.disarm()
        return {"took_effect": True}

    gen = FaultCycle("kill", draw, opts.get("workers", 1), gap_ms=opts.get("kill_gap_ms", (2000, 6000)))
    return Package("kill", gen, execute, final, "workers")


def pause_package(opts: dict) -> Package:
    def execute(env, op):
        out = []
        if op["value"].get("at") == "publish":  # paused writer: park the next publish after validation
            for t in op["value"]["targets"]:
                env.slots[t].park_publish_ms = op["value"]["hold_ms"]
            return {"parking": op["value"]["targets"], "took_effect": None}
        for t in op["value"]["targets"]:
            pid = env.slots[t].pid
            if pid is None:  # the slot's worker was just retired: pause the one that replaces it
                try:
                    pid = env.slots[t].ensure_started().pid
                except Exception as e:
                    out.append({"slot": t, "pid": None, "stopped": False, "error": f"{type(e).__name__}: {e}"})
                    continue
            tree = procs.ProcessTree(pid)
            tree.pause()
            earlier, env.paused[t] = env.paused.get(t), tree   # its resume lets go of this pause's holds only
            if earlier is not None:   # paused again before its resume (a step abandoned): one hold, this one
                earlier.resume()
            try:
                stopped = psutil.Process(pid).status() == psutil.STATUS_STOPPED
            except psutil.NoSuchProcess:
                stopped = False
            out.append({"slot": t, "pid": pid, "stopped": stopped})
        return {"paused": out, "took_effect": any(p["stopped"] for p in out)}

    def resume(env, op=None):
        out = []
        for t in (op["value"]["targets"] if op else list(env.paused)):
            tree = env.paused.pop(t, None)
            if tree is not None:
                held = tree.held_pids()
                left = sorted(set(held) - set(tree.resume()))   # another fault holds these: its heal continues them
                out.append({"slot": t, "pid": tree.pid, **({"still_held_by_another_fault": left} if left else {})})
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
    # a paused writer is parked by the worker host's in-process barrier hook, or, where the
    # backend has none (a black-box program), frozen inside its publish call
    needs = ()
    if opts.get("pause_at") == "publish":
        from chaos.nemesis.base import backend_of, sut_options

        hook = backend_of(opts).abilities(sut_options(opts)).has("barrier", via="hook")
        needs = ("barrier=hook",) if hook else ("freeze-call",)
    return Package("pause", gen, run, lambda env: resume(env), "workers", heals=("resume",), needs=needs)


def _restart_one(slot, t: int, attempts: int = 3) -> dict:
    """Ask the slot's live host to restart. A host that dies meanwhile (its op
    ended ``info``: the slot retired it) is not a restart: wait for its
    successor and ask again. A host without the command is replaced instead."""
    errors = []
    for _ in range(attempts):
        deadline = time.monotonic() + 2.0  # a retired worker's successor starts at the slot's next op
        while slot.client is None and time.monotonic() < deadline:
            time.sleep(0.05)
        client = slot.client
        if client is None:   # the slot has no op to start one for: asking again only holds the nemesis
            errors.append("no live worker")   # thread (two such targets once outlasted the 10-s step bound)
            break
        restart = getattr(client, "restart", None)
        if restart is None:  # an old host: a fresh process is the restart
            return {"slot": t, "pid": slot.kill(), "restarted": True, "via": "kill (no restart command)"}
        try:
            restart()
            return {"slot": t, "pid": client.pid, "restarted": True, **({"retries": errors} if errors else {})}
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}"[:200])
            if getattr(client, "alive", True):  # alive but could not reopen (backend down): retire it
                return {"slot": t, "pid": slot.kill(), "restarted": True, "via": f"kill ({errors[-1]})"}
    return {"slot": t, "restarted": False, "errors": errors}


def restart_package(opts: dict) -> Package:
    def execute(env, op):
        out = []
        for t in op["value"]["targets"]:
            stopped = stopped_reason(env, t)
            # a stopped host answers nothing: restarting it would block the nemesis
            # thread until someone resumes or kills it; the pause's own heal resumes it
            out.append({"slot": t, "restarted": False, "skipped": stopped} if stopped else _restart_one(env.slots[t], t))
        return {"restarted": out, "took_effect": any(r["restarted"] for r in out)}

    gen = FaultCycle("restart", _draw_one, opts.get("workers", 1), gap_ms=opts.get("restart_gap_ms", (2000, 6000)))
    return Package("restart", gen, execute, lambda env: {"took_effect": True}, "workers")
