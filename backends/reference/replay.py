"""In-process replay of a conformance manifest (vectors.md §3, §5-§7, §11)
against any engine-style backend that accepts a settable clock and hooks.

``replay(manifest, open_fn)`` runs every action in order and returns
``(transcript, final)`` in the manifest's shapes, so a test compares them
with ``strict_equal`` to ``manifest["expected"]``. The runner-side
bookkeeping (fault map, preflight list) follows vectors.md §11.11.

Barriers are real: every ``ledger-publication.preflight`` starts the public
``publish`` call in a thread that parks in ``hooks.before_commit`` (holding
no lock or transaction); the matching ``ledger-publication.commit`` sets the
clock and releases it. A preflight that returns before the hook yields its
envelope. A commit with no parked call (after a restart) is a fresh call.
Response loss raises ``ReplyLost`` from ``hooks.after_commit``.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Callable

from backends.api import FixedClock, Hooks, ReplyLost
from backends.contract.records import Reply
from backends.contract import loads_strict, operation_digest, parse_instant
from backends.safeload import MANIFEST

CLAIM_OPS = {"work-claim.read": "read", "work-claim.acquire": "acquire", "work-claim.renew": "renew",
             "work-claim.release": "release", "work-claim.capabilities": "capabilities",
             "legacy-transition-v1.commit": "legacy-transition", "legacy-create-v1.commit": "legacy-create",
             "ledger-publication.read": "publication-read"}
RESPONSE_LOSS = {"claim": "claim-response-loss", "publish": "publication-response-loss"}


def load_manifest(path: str | os.PathLike, root: str | os.PathLike | None = None) -> dict:
    """Strictly load one manifest: a regular file, strict UTF-8 unique-key
    JSON, one trailing LF, no symlink anywhere under the fixture root.

    ``root`` is the vectors folder (default: the folder holding the case
    folder, ``<root>/<case>/manifest.json``). Symlinks above it (a ``../shared``
    that is a link) are the user's business and are followed.
    """
    p = Path(path)
    root = Path(root) if root is not None else p.parent.parent
    try:
        inside = p.relative_to(root).parts
    except ValueError:
        raise ValueError(f"manifest {p} is not under its vectors folder {root}") from None
    for depth in range(len(inside), 0, -1):
        part = root.joinpath(*inside[:depth])
        if stat.S_ISLNK(os.lstat(part).st_mode):
            raise ValueError(f"symlink in manifest path: {part}")
    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"not a regular file: {p}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(MANIFEST.max_bytes + 1)
    finally:
        os.close(fd)
    if len(raw) > MANIFEST.max_bytes:
        raise ValueError(f"manifest {p}: larger than the {MANIFEST.describe_bytes()} limit")
    if not raw.endswith(b"\n") or raw.endswith(b"\n\n"):
        raise ValueError(f"manifest must end with exactly one LF: {p}")
    return loads_strict(raw)


def strict_equal(a, b) -> bool:
    """Structural equality that is type-strict (``True != 1``, ``1 != 1.0``);
    key order ignored, array order significant."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    return a == b


class _Aborted(Exception):
    """A parked call abandoned by a restart."""


class ReplayHooks(Hooks):
    """Barriers keyed by operation id, plus the two response-loss faults."""

    def __init__(self, faults: dict):
        self.faults = faults
        self._barriers: dict[str, tuple[threading.Event, threading.Event, list]] = {}
        self._lock = threading.Lock()

    def arm(self, operation_id: str) -> tuple[threading.Event, threading.Event, list]:
        entry = (threading.Event(), threading.Event(), [False])  # parked, release, aborted
        with self._lock:
            self._barriers[operation_id] = entry
        return entry

    def before_commit(self, request: dict) -> None:
        with self._lock:
            entry = self._barriers.pop(request.get("operation_id"), None)
        if entry is None:
            return
        parked, release, aborted = entry
        parked.set()
        release.wait()
        if aborted[0]:
            raise _Aborted()

    def after_commit(self, op: str, request: dict, reply: Reply) -> None:
        fault = RESPONSE_LOSS["publish" if op == "publish" else "claim"]
        if self.faults.get(fault):
            self.faults[fault] = False  # one-shot, consumed by a fresh success
            raise ReplyLost(fault)


class _Parked:
    """A publish call running in a thread, parked at the barrier."""

    def __init__(self, backend, request: dict, hooks: ReplayHooks):
        self.request = request
        self.parked, self.release, self.aborted = hooks.arm(request["operation_id"])
        self.result: Reply | BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(backend,), daemon=True)
        self.thread.start()

    def _run(self, backend) -> None:
        try:
            self.result = backend.call("publish", self.request)
        except BaseException as exc:  # noqa: BLE001 - handed to the replaying thread
            self.result = exc
        finally:
            self.done.set()
            self.parked.set()  # wake a waiter if the call ended before the hook

    def wait_parked_or_done(self, timeout: float = 10.0) -> None:
        if not self.parked.wait(timeout):
            raise TimeoutError("publish call neither parked nor finished")

    def finish(self, timeout: float = 10.0):
        self.release.set()
        if not self.done.wait(timeout):
            raise TimeoutError("parked publish did not finish")
        self.thread.join(timeout)
        return self.result

    def abort(self) -> None:
        self.aborted[0] = True
        self.release.set()
        self.thread.join(5.0)


def _entry(result) -> dict:
    if isinstance(result, Reply):
        return {"exit": result.exit, "stdout": result.envelope}
    raise result


def replay(manifest: dict, open_fn: Callable[[dict, FixedClock, Hooks], object]) -> tuple[list, dict]:
    """Replay ``manifest``; ``open_fn(spec, clock, hooks)`` opens the backend.
    The spec carries ``name``, ``namespaces``, ``coordination_scope``,
    ``durability``, ``write_paths``, ``faults`` and ``durable`` from
    ``initial``. The backend must expose ``store.faults`` (shared with the
    runner's fault map), ``restart()`` and ``store.export_durable()``."""
    initial = manifest["initial"]
    cfg = initial["backend"]
    faults = dict(initial["faults"])
    floors = [parse_instant(f["observed_at"]) for f in initial["durable"]["clock_floors"]]
    clock = FixedClock(min(floors) if floors else 0)
    hooks = ReplayHooks(faults)
    spec = {"name": cfg["name"], "namespaces": list(cfg["ledger_binding"]["namespaces"]),
            "coordination_scope": cfg["coordination_scope"], "durability": cfg["durability"],
            "write_paths": dict(cfg["write_paths"]), "faults": faults, "durable": initial["durable"]}
    backend = open_fn(spec, clock, hooks)
    backend.store.faults = faults  # one fault map: the store's and the runner's
    transcript: list[dict] = []
    preflights: list[dict] = []
    parked: dict[str, _Parked] = {}
    try:
        for action in manifest["actions"]:
            transcript.append(_run_action(action, backend, clock, hooks, faults, preflights, parked))
        return transcript, {"backend": cfg, "faults": faults, "durable": backend.store.export_durable(),
                            "process": {"preflights": preflights}}
    finally:
        for call in parked.values():
            call.abort()
        backend.close()


def _run_action(action, backend, clock, hooks, faults, preflights, parked) -> dict:
    operation = action["operation"]
    if "physical_now" in action:
        clock.set(parse_instant(action["physical_now"]))
    if operation == "control.inject-fault":
        faults[action["target"]] = True
        return {"event": "fault-injected", "target": action["target"]}
    if operation == "control.restart":
        for call in parked.values():
            call.abort()
        parked.clear()
        preflights.clear()
        backend.restart()
        return {"event": "restart"}
    if operation == "ledger-publication.preflight":
        request = action["request"]
        call = _Parked(backend, request, hooks)
        call.wait_parked_or_done()
        if call.done.is_set():
            return _entry(call.result)
        parked[request["operation_id"]] = call
        key = (request["operation_id"], request["ledger_namespace"], request["item_id"])
        if all((p["operation_id"], p["ledger_namespace"], p["item_id"]) != key for p in preflights):
            preflights.append({"operation_id": key[0], "ledger_namespace": key[1], "item_id": key[2],
                               "request": request, "operation_digest": operation_digest(request)})
        return {"event": "preflight-complete", "operation_id": request["operation_id"]}
    if operation == "ledger-publication.commit":
        call = parked.pop(action["operation_id"], None)
        if call is not None and call.request != action["request"]:
            raise ValueError("commit request differs from its preflight request")
        try:
            result = call.finish() if call is not None else backend.call("publish", action["request"])
            return _entry(result)
        except ReplyLost:
            return {"event": "response-lost", "operation_id": action["operation_id"]}
    op = CLAIM_OPS[operation]
    try:
        return _entry(backend.call(op, action["request"]))
    except ReplyLost:
        return {"event": "response-lost", "namespace": "work-claim", "command": op}
