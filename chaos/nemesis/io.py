"""I/O faults: fsync EIO through the preloaded shim, and lost replies.

``fsync`` (workers; ``--backend postgres`` faults the server instead, see
``chaos.nemesis.server``): every worker is exec'd with the fsync shim preloaded and one shared
control file (``tmp/failsync``); the op creates it (every fsync/fdatasync of
every worker fails with EIO: SQLite answers "disk I/O error", the engine maps
it to exit 6 or to no reply (an ambiguous claim commit): ``fail`` or ``info``), the heal op ``fsync-heal``
removes it; a slow backend's window, like its gaps, lasts ``sqrt(scale)`` times longer. Evidence: at the heal, the number of ops that ended exit 6 or
``info`` while the file existed (the heal's value carries it).

``lost-reply``: arms ``exit-after-commit`` on a target worker (the next
successful commit of the drawn class is followed by ``os._exit(137)`` before
any reply; for an external CLI the host does it once the CLI answered exit 0). Evidence: the worker's next op ended ``info`` with exit status
137, counted by the slot (resolved at the end of the run). A stopped
(paused) target is skipped, and the op's value says so. While an armed
worker has not committed yet (``waiting``), the run's workload goes on past
its time limit, bounded, so a slow machine still sees the fault happen.
``lost_reply_classes`` (opts, default both): the op classes a lost reply is
drawn from; a run that publishes nothing (a black-box backend whose items have
no public path) draws ``claim`` only, since an armed ``publish`` could never fire.
"""

from __future__ import annotations

from chaos.nemesis.base import FaultCycle, Package, draw_targets, stopped_reason


def fsync_package(opts: dict) -> Package:
    def execute(env, op):
        if env.fsync is None:
            return {"took_effect": False, "error": "no fsync shim"}
        if op["f"] == "fsync-heal":
            since = env.fsync_armed_at
            env.fsync.disarm()
            env.fsync_armed_at = None
            hit = env.uncertain_since(since) if since is not None else 0
            if hit:
                env.coverage.took_effect("fsync")
            return {"disarmed": True, "uncertain_ops": hit, "took_effect": hit > 0}
        env.fsync.arm()
        env.fsync_armed_at = env.now_ns()
        return {"armed": env.fsync.armed, "took_effect": None}

    def final(env):
        if env.fsync is not None and env.fsync.armed:
            return execute(env, {"f": "fsync-heal", "value": {}})
        return {"took_effect": True}

    def draw(s, workers):
        return {"targets": "all"}, s

    # the window must overlap calls: a slow backend's window grows like its gaps (chaos.nemesis._scaled),
    # with sqrt(scale), so the share of the run under EIO stays a fast backend's
    k = float(opts.get("scale") or 1.0) ** 0.5
    dur = tuple(int(ms * k) for ms in opts.get("fsync_ms", (500, 1500)))
    gen = FaultCycle("fsync", draw, opts.get("workers", 1), gap_ms=opts.get("fsync_gap_ms", (3000, 8000)),
                     dur_ms=dur, heal="fsync-heal")
    return Package("fsync", gen, execute, final, "workers", requires=("failsync",), heals=("fsync-heal",))


def lost_reply_package(opts: dict) -> Package:
    def execute(env, op):
        out = []
        for t in op["value"]["targets"]:
            slot = env.slots[t]
            stopped = stopped_reason(env, t)
            if stopped:  # a stopped host cannot take the command; never block the nemesis thread on it
                out.append({"slot": t, "armed": False, "skipped": stopped})
                continue
            try:
                client = slot.ensure_started()
                client.exit_after_commit(op["value"]["op_class"])
                slot.armed_exit = op["value"]["op_class"]
                out.append({"slot": t, "pid": client.pid, "armed": True})
            except Exception as e:
                out.append({"slot": t, "armed": False, "error": f"{type(e).__name__}: {e}"})
        # took effect only once the worker really died after a commit: resolved at the end
        return {"armed": out, "took_effect": None}

    classes = tuple(opts.get("lost_reply_classes") or ("publish", "claim"))

    def draw(s, workers):
        targets, s = draw_targets(s, workers, most=1)
        cls, s = s.choice(classes)
        return {"targets": targets, "op_class": cls}, s

    def waiting(env) -> bool:  # armed, and no armed worker has died after a commit yet
        return any(s.armed_exit for s in env.slots) and not any(s.exited_after_commit for s in env.slots)

    gen = FaultCycle("lost-reply", draw, opts.get("workers", 1), gap_ms=opts.get("lost_gap_ms", (2000, 6000)))
    return Package("lost-reply", gen, execute, lambda env: {"took_effect": True}, "workers", waiting=waiting)
