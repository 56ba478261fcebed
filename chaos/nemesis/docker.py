"""Faults of ``--nodes docker`` through the Docker API, on the server container.

* ``kill``: ``container.kill()`` (SIGKILL to the container's init, the
  postmaster), then ``container.start()``: PostgreSQL runs crash recovery on
  the bind-mounted data directory. Evidence, from the daemon: the container
  exited with code 137 and runs again (its ``StartedAt`` moved).
* ``pause`` / ``resume``: ``container.pause()`` / ``unpause()`` (the daemon's
  cgroup freezer: every server process, later forks too). Evidence: the
  daemon reports ``State.Paused``.
* ``restart``: ``container.restart()`` (SIGINT, PostgreSQL's fast shutdown, then start).
  Evidence: a new ``StartedAt`` and the server accepting connections again.
"""

from __future__ import annotations

import time

from chaos.nemesis.base import FaultCycle, Package


def _server(env):
    server = getattr(getattr(env, "target", None), "server", None)
    if server is None or not hasattr(server, "container"):
        raise RuntimeError("no server container of ours to fault")
    return server


def _state(server) -> dict:
    server.container.reload()
    return server.container.attrs.get("State") or {}


def _no_target(s, workers):
    return {"target": "server-container"}, s


def kill_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        was_paused = bool(_state(server).get("Paused"))
        if was_paused:   # the daemon kills a frozen container only once thawed; a power cut hits it as it is
            server.resume()
        before = _state(server).get("StartedAt")
        pids = server.kill()
        st = _state(server)
        exit_code, stopped = st.get("ExitCode"), not st.get("Running")
        t0 = time.monotonic()
        try:
            env.target.start_server()
            error = None
        except Exception as e:
            error = f"{type(e).__name__}: {e}"[:300]
        after = _state(server)
        return {"target": "server-container", "container": server.container.name, "killed_pids": pids,
                "was_paused": was_paused, "exit_code": exit_code, "restart_ms": round((time.monotonic() - t0) * 1000),
                "restart_error": error, "running_again": bool(after.get("Running")),
                "started_at": [before, after.get("StartedAt")],
                "took_effect": stopped and exit_code == 137}

    def final(env):
        server = _server(env)
        server.resume()
        if not server.running():
            env.target.start_server()
        return {"took_effect": True, "running": server.running()}

    gen = FaultCycle("kill", _no_target, opts.get("workers", 1), gap_ms=opts.get("kill_gap_ms", (3000, 7000)))
    return Package("kill", gen, execute, final, "server")


def pause_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        if op["f"] == "resume":
            server.resume()
            return {"target": "server-container", "resumed": not _state(server).get("Paused"), "took_effect": True}
        server.pause()
        paused = bool(_state(server).get("Paused"))
        return {"target": "server-container", "container": server.container.name, "paused": paused,
                "took_effect": paused}

    def final(env):
        _server(env).resume()
        return {"took_effect": True}

    gen = FaultCycle("pause", _no_target, opts.get("workers", 1), gap_ms=opts.get("pause_gap_ms", (2000, 6000)),
                     dur_ms=opts.get("pause_ms", (800, 2500)), heal="resume")
    return Package("pause", gen, execute, final, "server", heals=("resume",))


def restart_package(opts: dict) -> Package:
    def execute(env, op):
        server = _server(env)
        if _state(server).get("Paused"):
            return {"target": "server-container", "skipped": "the container is paused", "took_effect": False}
        before = _state(server).get("StartedAt")
        t0 = time.monotonic()
        try:
            server.restart()
            error = None
        except Exception as e:
            error = f"{type(e).__name__}: {e}"[:300]
        after = _state(server).get("StartedAt")
        return {"target": "server-container", "container": server.container.name, "started_at": [before, after],
                "restart_ms": round((time.monotonic() - t0) * 1000), "error": error,
                "took_effect": error is None and after != before and server.running()}

    gen = FaultCycle("restart", _no_target, opts.get("workers", 1), gap_ms=opts.get("restart_gap_ms", (3000, 7000)))
    return Package("restart", gen, execute, lambda env: {"took_effect": True}, "server")
