"""A deterministic-mode worker: ``python -m chaos.deterministic.worker``, one process per client
thread, run under the scheduling shim.

Single-threaded on purpose (the shim serializes threads only at their points,
and a worker host's thread per call would run unserialized between them; a
black-box program's per-call process is hosted in this thread too,
``chaos.deterministic.host``):
it opens the backend of ``$CHAOS_DET_SPEC`` with the process clock (which the
shim makes the scheduler's virtual clock), prints ``{"ready": true}``, then
reads one op per stdin line (``{"f", "value"}``) and writes one reply per
stdout line (``{"exit", "envelope", "wall_ms"}``, or ``{"error"}`` when the call raised). Python's ``random`` is
seeded from the worker's logical name, so a backend's jittered back-off is the
same in every run.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time


def main() -> int:
    from backends.api import FixedClock, Hooks
    from backends.registry import open_backend

    random.seed(os.environ.get("CHAOS_SCHED_NAME", ""))
    clock = FixedClock(None)
    # the backend's spec is this process's, not its programs': a black box's heap would hold its store paths
    spec = json.loads(os.environ.pop("CHAOS_DET_SPEC"))
    if spec.get("backend") == "external":   # its per-call program in this one thread (chaos.deterministic.host)
        from chaos.deterministic.host import open_backend as open_hosted

        backend = open_hosted(spec, clock, Hooks())
    else:
        backend = open_backend(spec, clock, Hooks())
    out = sys.stdout

    def emit(obj: dict) -> None:
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        out.flush()

    emit({"ready": True})
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return 0
        msg = json.loads(line)
        if msg.get("clock_ms") is not None:   # an exact-time op: decided at that (virtual) instant
            clock.set(msg["clock_ms"])
        try:
            reply = backend.call(msg["f"], msg["value"])
        except Exception as e:   # outcome unknown: the harness records info and starts a fresh worker
            emit({"error": f"{type(e).__name__}: {e}"})
            continue
        finally:
            clock.set(None)
        time.sleep(0)   # a point between the work and its reply: where a racer's freeze after a commit lands
        emit({"exit": reply.exit, "envelope": reply.envelope, "wall_ms": time.time_ns() // 1_000_000})


if __name__ == "__main__":
    sys.exit(main())
