"""The claims workload against a real contract engine in logical time
(``workloads.interpreter.simulate``), shared by the workload tests: the
backend's clock is the op's logical time, or exactly its ``clock_ms`` (what
the worker host does for a pinned call)."""

from __future__ import annotations

from backends.api import FixedClock
from backends.registry import open_backend
from checkers.history import classify
from workloads.claims import ClaimsConfig, claims_workload
from workloads.generator import clients, secs
from workloads.interpreter import simulate

BASE_MS = 1_894_353_330_250


def simulate_claims(tmp_path, cfg: ClaimsConfig | None, spec: dict, seed: int, workers: int, seconds: float,
                    lose=lambda op: False, latency_ns: int = 1_000_000, until=None):
    """``(history, ctx, world, final durable state)`` of one simulated run;
    ``spec`` picks the backend (``{"backend": "sqlite"}``, or ``python`` with a factory);
    ``until(gen)``: what bounds the run instead of ``seconds`` (``chaos.runner.UntilProven``)."""
    gen, world = claims_workload(seed, cfg or ClaimsConfig())
    clock = FixedClock(BASE_MS)
    backend = open_backend(dict(spec, path=str(tmp_path / "c.db"), namespaces=list(world.namespaces)), clock)
    backend.store.seed(world.durable())

    def complete(op):
        clock.set(op["clock_ms"] if "clock_ms" in op else BASE_MS + op["time"] // 1_000_000)
        reply = backend.call(op["f"], op["value"])
        if lose(op):
            return {"type": "info", "error": "reply lost", "latency": latency_ns}
        done = {"type": classify(reply.exit, reply.envelope), "value": reply.to_json(), "latency": latency_ns}
        if "clock_ms" in op:
            done["clock_ms"] = op["clock_ms"]
        return done

    try:
        h = simulate(clients(until(gen) if until else gen), seed=seed, workers=workers, complete=complete,
                     time_limit=None if until else secs(seconds))
        caps = backend.call("capabilities", {}).envelope
        final = backend.store.export_durable()
    finally:
        backend.close()
    h = [dict(o, index=i) for i, o in enumerate(h)]
    h.append({"index": len(h), "process": "nemesis", "type": "info", "f": "final-state", "time": h[-1]["time"],
              "value": {"durable": final}})
    ctx = {"capabilities": caps, "lease_ms": (cfg or ClaimsConfig()).lease_ms,
           "tuples": [list(t) for t in world.tuples], "initial_durable": world.durable(), "backend": "sqlite",
           "workload": "claims"}
    return h, ctx, world, final


def pairs(h):
    """(invoke, completion) per client op, in invoke order."""
    open_, out = {}, []
    for o in h:
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            open_[o["process"]] = len(out)
            out.append([o, None])
        elif o["process"] in open_:
            out[open_.pop(o["process"])][1] = o
    return [(i, c) for i, c in out if c is not None]


def env(done):
    return (done.get("value") or {}).get("envelope") or {}


def code(done):
    return (env(done).get("error") or {}).get("code")
