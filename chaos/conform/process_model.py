"""Does a Python backend keep its state where another process sees it?

Every worker of ``chaos run`` (and every conformance host) is its own
process that opens the backend from the same spec; the store at
``spec["path"]`` is all they share (docs/backend-authors.md, "Process
model"). A backend that keeps its claims in process memory (a dict and a
lock) then looks to the checkers like a store that forgets and contradicts
itself: a conform run fails cases with pages of diffs, a chaos run shows
hundreds of anomalies, and none of it says why.

``check(factory)`` says it in one line, before any case: a first process
opens the spec, seeds one item and acquires it through the public API; a
second one (this process) opens the same spec and reads the item. If the read
answers and does not show the claim, the backend keeps its state in process
memory. When the probe itself cannot run (the factory fails to open, the
acquire is refused), it decides nothing and returns None: the cases then
report what fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from backends.api import FixedClock, Hooks

PROBE_OWNER = "process-model-probe"
T0_MS = 1_894_352_400_000
LEASE_MS = 600_000
TIMEOUT_S = 120


def _probe_world() -> tuple[list[str], tuple[str, str], dict]:
    from workloads.claims import ClaimsConfig, claims_workload

    _, world = claims_workload(1, ClaimsConfig(namespaces=1, items=1, race_pairs=0))
    return list(world.namespaces), world.tuples[0], world.durable()


def first_process() -> None:
    """The first process (``python -c``): seed, acquire; exit 0 when the acquire was granted."""
    from backends.registry import open_backend

    job = json.load(sys.stdin)
    backend = open_backend(job["spec"], FixedClock(T0_MS), Hooks())
    try:
        backend.store.seed(job["durable"])
        ns, item = job["tuple"]
        reply = backend.call("acquire", {"ledger_namespace": ns, "item_id": item, "owner_id": PROBE_OWNER,
                                         "lease_duration_ms": LEASE_MS,
                                         "expected": {"last_epoch": "0", "active": None}})
    finally:
        backend.close()
    sys.exit(0 if reply.exit == 0 else 3)


def check(factory: str, scratch_root: str | None = None) -> str | None:
    """The one-line diagnosis of a backend whose state stays in process memory, else None. The probe's
    scratch directory goes under ``scratch_root`` (a run's store) when given, else the system temp dir;
    it is named by this process's pid, so the next probe there removes one a SIGKILL left behind."""
    from backends.registry import open_backend
    from chaos.store import private_dir

    namespaces, (ns, item), durable = _probe_world()
    scratch = private_dir(".chaos-process-model-", scratch_root)
    spec = {"backend": "python", "factory": factory, "path": os.path.join(scratch, "state"), "namespaces": namespaces}
    # the factory is importable here: the first process imports from the same places
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path))
    try:
        first = subprocess.run([sys.executable, "-c", "from chaos.conform.process_model import first_process; "
                                "first_process()"], input=json.dumps({"spec": spec, "durable": durable,
                                                                      "tuple": [ns, item]}),
                               capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        if first.returncode != 0:
            return None
        backend = open_backend(spec, FixedClock(T0_MS + 1_000), Hooks())
        try:
            reply = backend.call("read", {"ledger_namespace": ns, "item_id": item})
        finally:
            backend.close()
    except Exception:   # the probe could not run: it decides nothing
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    read_back = ((reply.envelope or {}).get("result") or {}).get("read_back") or {}
    active = read_back.get("active")
    if reply.exit != 0 or (isinstance(active, dict) and active.get("owner_id") == PROBE_OWNER):
        return None
    return (f"--factory {factory} keeps its state in process memory: a claim one process acquired was not there "
            "for a second process opening the same spec (every worker is its own process; keep all state in the "
            "store at spec['path'], docs/backend-authors.md 'Process model')")
