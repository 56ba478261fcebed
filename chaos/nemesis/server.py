"""Server-targeted nemeses for ``--backend postgres`` (our own ``PgServer``).

* ``kill``: SIGKILL the postmaster and every backend (snapshot at kill time),
  reap them, start the server again at once (crash recovery). Evidence: every
  old PID is gone; the value also tells the new postmaster and whether the
  server log shows the recovery ("not properly shut down"). While an fsync
  fault is armed the restart fails; the fsync heal brings the server back.
* ``pause`` / ``resume``: freeze the whole server (cgroup v1 freezer as root,
  which also covers backends forked later; else SIGSTOP of a snapshot).
  Evidence: the freezer reports FROZEN, or every snapshotted PID is stopped.
* ``fsync`` / ``fsync-heal``: the EIO shim is preloaded into the server
  (``extra_env``); arming makes its WAL fdatasync fail, so it PANICs and the
  postmaster exits while armed. The heal disarms and brings the server back
  (start with crash recovery when it exited). Evidence: the server log shows
  a PANIC since the arm (``postmaster_exited`` / ``restarted`` are recorded too).
* ``lost-reply`` / ``reply-heal``: workers reach the server through a
  ``FaultProxy``; for a drawn window the proxy forwards requests and discards
  every reply (the op commits, the worker hears nothing). The heal stops
  dropping and resets every proxied connection, so the ops whose replies were
  lost end ``info`` at once instead of at their deadline. Evidence: reply
  chunks really discarded during the window.

Every op runs on the nemesis thread; ``env.target`` is the run's
``chaos.sut.postgres.PostgresTarget``.
"""

from __future__ import annotations

import os
import time

import psutil

from chaos.nemesis.base import FaultCycle, Package

RECOVERY_MARKERS = ("not properly shut down", "automatic recovery in progress", "was interrupted")


def _log_size(server) -> int:
    try:
        return os.path.getsize(server.log_path)
    except OSError:
        return 0


def _log_since(server, offset: int) -> str:
    try:
        with open(server.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _server(env):
    server = getattr(getattr(env, "target", None), "server", None)
    if server is None:
        raise RuntimeError("no server of ours to fault (a --dsn server is never killed, paused or fsync-faulted)")
    return server


def _no_target(s, workers):
    return {"target": "server"}, s


def kill_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        fsync = env.target.server_fsync
        if fsync is not None and fsync.armed:
            # its restart would fail (the server cannot even write its lock file), and
            # killing now would mask the fsync fault's own effect: skip, say so
            return {"target": "server", "skipped": "the server's fsync fault is armed", "took_effect": False}
        offset = _log_size(server)
        old_pid = server.pid
        pids = server.kill()
        gone = not [p for p in pids if _alive(p)]
        t0 = time.monotonic()
        try:
            env.target.start_server()
            restart_error = None
        except Exception as e:  # e.g. an armed fsync fault: its heal brings the server back
            restart_error = f"{type(e).__name__}: {e}"[:300]
        recovery_ms = round((time.monotonic() - t0) * 1000)
        log = _log_since(server, offset)
        recovered = any(m in log for m in RECOVERY_MARKERS)
        return {"target": "server", "killed_pids": pids, "old_postmaster": old_pid, "all_gone": gone,
                "new_postmaster": server.pid if server.running() else None, "restart_ms": recovery_ms,
                "restart_error": restart_error, "crash_recovery_logged": recovered,
                "took_effect": bool(pids) and gone}

    gen = FaultCycle("kill", _no_target, opts.get("workers", 1), gap_ms=opts.get("kill_gap_ms", (3000, 7000)))
    return Package("kill", gen, execute, lambda env: ensure_serving(env), "server")


def pause_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        if op["f"] == "resume":
            server.resume()
            return {"target": "server", "resumed": True, "took_effect": True}
        pids = server.pause()
        freezer = getattr(server, "_freezer", None)
        if freezer is not None:
            frozen, how = freezer.state() == "FROZEN", "cgroup-freezer"
        else:
            frozen, how = _all_stopped(pids), "sigstop"
        return {"target": "server", "pids": pids, "mechanism": how, "frozen": frozen, "took_effect": frozen}

    def final(env):
        server = _server(env)
        server.resume()
        return {"target": "server", "resumed": True, "took_effect": True}

    gen = FaultCycle("pause", _no_target, opts.get("workers", 1), gap_ms=opts.get("pause_gap_ms", (2000, 6000)),
                     dur_ms=opts.get("pause_ms", (800, 2500)), heal="resume")
    return Package("pause", gen, execute, final, "server", heals=("resume",))


def _all_stopped(pids: list[int]) -> bool:
    ok = True
    for pid in pids:
        try:
            ok &= psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            pass
    return ok and bool(pids)


def ensure_serving(env, timeout: float = 15.0) -> dict:
    """Bring our server back to accepting connections: un-pause, start it when
    the postmaster exited, crash-restart it when it stays unreachable."""
    import psycopg

    server = _server(env)
    server.resume()
    deadline = time.monotonic() + timeout
    restarted = False
    while time.monotonic() < deadline:
        if not server.running():
            try:
                env.target.start_server()
            except Exception:  # e.g. a still-armed fault: retry until the deadline
                time.sleep(0.2)
            restarted = True
            continue
        try:
            with psycopg.connect(server.dsn(tcp=False), connect_timeout=2, autocommit=True) as c:
                c.execute("SELECT 1")
            return {"serving": True, "restarted": restarted, "took_effect": True}
        except psycopg.Error:
            time.sleep(0.1)
    server.kill()
    env.target.start_server()
    return {"serving": server.running(), "restarted": True, "took_effect": True}


def fsync_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        fault = env.target.server_fsync
        if fault is None:
            raise RuntimeError("the server was not started with the fsync shim")
        if op["f"] == "fsync-heal":
            since = getattr(env, "server_log_offset", 0)
            old_pid = server.pid
            exited = not server.running()
            fault.disarm()
            back = ensure_serving(env)
            log = _log_since(server, since)
            panic = "PANIC" in log
            if panic:  # an exit alone may be another fault's doing (a kill whose restart failed)
                env.coverage.took_effect("fsync")
            return {"target": "server", "disarmed": True, "panic_logged": panic,
                    "postmaster_exited": exited, "restarted": back["restarted"] or server.pid != old_pid,
                    "serving": back["serving"], "took_effect": panic}
        env.server_log_offset = _log_size(server)
        fault.arm()
        loaded = server.preload_loaded("failsync")
        return {"target": "server", "armed": fault.armed, "shim_loaded": loaded, "took_effect": None}

    def final(env):
        fault = env.target.server_fsync
        if fault is not None and fault.armed:
            return execute(env, {"f": "fsync-heal", "value": {}})
        return ensure_serving(env)

    gen = FaultCycle("fsync", _no_target, opts.get("workers", 1), gap_ms=opts.get("fsync_gap_ms", (3000, 8000)),
                     dur_ms=opts.get("fsync_ms", (500, 1500)), heal="fsync-heal")
    return Package("fsync", gen, execute, final, "server", requires=("failsync",), heals=("fsync-heal",))


#: how long a lost-reply window is held open past its planned end waiting for a reply to drop
LOST_REPLY_GRACE_S = 3.0


def lost_reply_package(opts: dict) -> Package:
    def execute(env, op):
        proxy = getattr(env.target, "proxy", None)
        if proxy is None:
            raise RuntimeError("workers do not connect through the fault proxy")
        if op["f"] == "reply-heal":
            # The window is "until a reply was really lost": if none crossed the
            # proxy yet (ops stalled by another fault, a loaded machine), keep
            # dropping a little longer, bounded, instead of a fault that did nothing.
            base = getattr(env, "proxy_dropped_at_arm", proxy.dropped)
            waited = time.monotonic()
            while proxy.dropped == base and time.monotonic() - waited < LOST_REPLY_GRACE_S:
                time.sleep(0.02)
            proxy.drop_responses = False
            dropped = proxy.dropped - base
            proxy.reset_all()  # the ops whose replies were lost end now (info), not at their deadline
            if dropped:
                env.coverage.took_effect("lost-reply")
            return {"target": "proxy", "dropped_reply_chunks": dropped, "reset": True, "took_effect": dropped > 0,
                    "extended_ms": round((time.monotonic() - waited) * 1000)}
        env.proxy_dropped_at_arm = proxy.dropped
        proxy.drop_responses = True
        return {"target": "proxy", "dropping": True, "took_effect": None}

    def final(env):
        proxy = getattr(env.target, "proxy", None)
        if proxy is not None and proxy._drop:
            return execute(env, {"f": "reply-heal", "value": {}})
        return {"took_effect": True}

    def draw(s, workers):
        return {"target": "proxy"}, s

    gen = FaultCycle("lost-reply", draw, opts.get("workers", 1), gap_ms=opts.get("lost_gap_ms", (2000, 6000)),
                     dur_ms=opts.get("lost_ms", (300, 1200)), heal="reply-heal")
    return Package("lost-reply", gen, execute, final, "server", heals=("reply-heal",))

