"""Hooks for in-process engines: a real blocking barrier and real reply loss.

``ConformHooks.before_commit`` parks the publish call of an armed operation id
in its own thread until the runner releases it (the call holds no lock or
transaction there: the engine calls the hook between its validation read
transaction and its write transaction). ``after_commit`` raises ``ReplyLost``
after a real commit when a loss is armed for that class of operation.
"""

from __future__ import annotations

import threading
from typing import Callable

from backends.api import Hooks, ReplyLost
from backends.contract.records import Reply
from chaos.conform.adapters.base import AdapterError, Parked

WAIT_S = 20.0


class Abandoned(Exception):
    """Raised inside a parked call that a restart abandons: it never commits."""


class Gate:
    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.abandoned = False


class ConformHooks(Hooks):
    def __init__(self) -> None:
        self.gates: dict[str, Gate] = {}
        self.lose: set[str] = set()  # "claim" / "publish"

    def before_commit(self, request: dict) -> None:
        gate = self.gates.get(request.get("operation_id"))
        if gate is None:
            return
        gate.reached.set()
        gate.release.wait()
        if gate.abandoned:
            raise Abandoned("parked call abandoned by a restart")

    def after_commit(self, op: str, request: dict, reply: Reply) -> None:
        cls = "publish" if op == "publish" else "claim"
        if cls in self.lose:
            self.lose.discard(cls)
            raise ReplyLost(f"{op} reply lost after commit (injected)")


class ThreadParked(Parked):
    def __init__(self, request: dict, gate: Gate, thread: threading.Thread, box: dict):
        super().__init__(request)
        self.gate, self.thread, self.box = gate, thread, box


def start_parked(hooks: ConformHooks, call: Callable[[str, dict], Reply], request: dict) -> Reply | ThreadParked:
    """Run ``call("publish", request)`` in a thread with the barrier armed;
    return the parked handle once the hook is reached, or the reply if the
    call ended first."""
    gate = Gate()
    hooks.gates[request["operation_id"]] = gate
    box: dict = {}
    done = threading.Event()

    def body() -> None:
        try:
            box["reply"] = call("publish", request)
        except BaseException as e:  # handed to the runner's thread
            box["error"] = e
        finally:
            done.set()

    thread = threading.Thread(target=body, name=f"publish-{request['operation_id']}", daemon=True)
    thread.start()
    for _ in range(int(WAIT_S / 0.01)):
        if gate.reached.wait(0.01) or done.is_set():
            break
    if gate.reached.is_set():
        return ThreadParked(request, gate, thread, box)
    hooks.gates.pop(request["operation_id"], None)
    if not done.is_set():
        raise AdapterError("publish neither returned nor reached the barrier")
    if "error" in box:
        raise box["error"]
    return box["reply"]


def finish_parked(hooks: ConformHooks, parked: ThreadParked) -> Reply:
    hooks.gates.pop(parked.request["operation_id"], None)
    parked.gate.release.set()
    parked.thread.join(WAIT_S)
    if parked.thread.is_alive():
        raise AdapterError("released publish did not finish")
    if "error" in parked.box:
        raise parked.box["error"]
    return parked.box["reply"]


def abandon_all(hooks: ConformHooks) -> None:
    """Let every parked call die without committing (a crash drops them)."""
    gates = list(hooks.gates.values())
    hooks.gates.clear()
    for gate in gates:
        gate.abandoned = True
        gate.release.set()
