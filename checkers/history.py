"""History records: reading, pairing invokes with completions, classifying replies.

A history is a list of dicts, one per line of ``history.jsonl`` (see
docs/architecture.md): ``index, time, process, type, f, value`` and, on
harness-side failures, ``error``. This module is shared by the runner (which
classifies replies as it records them) and by every checker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)

#: How a reply is recorded, by the contract's own words (§4, §5, §6, §8). The
#: first matching row wins; this table is the rule, ``classify`` applies it, and
#: docs/architecture.md ("Classification") prints it.
CLASSIFICATION = (
    ("exit 0, ok true, state committed (or no state: capabilities)", OK),
    ("exit != 0, ok false, state unchanged: every semantic refusal, also exit 6 "
     "clock-floor-persistence-failed, claim-store-unavailable and epoch-exhausted "
     "(the reply says nothing changed)", FAIL),
    ("state unknown: publication-outcome-unknown, claim-verify findings "
     "(the reply says the outcome is unknown)", INFO),
    ("no reply: crash, timeout, lost reply, unparseable output, not an object", INFO),
    ("anything else: a reply contradicting itself (e.g. exit 0 with ok false, "
     "exit 4 with state committed) proves nothing; the envelopes checker reports it", INFO),
)


def classify(exit_code: int | None, envelope: dict | None) -> str:
    """``ok`` / ``fail`` / ``info`` for one reply, by ``CLASSIFICATION``.

    ``fail`` means the reply itself says nothing changed (``state:
    "unchanged"``): a definite answer, which a checker may hold the backend
    to. ``info`` only when the reply says the outcome is unknown, or there is
    no (coherent) reply at all. ``None`` for either argument is no reply.
    """
    if not isinstance(exit_code, int) or isinstance(exit_code, bool) or not isinstance(envelope, dict):
        return INFO
    state, ok = envelope.get("state"), envelope.get("ok")
    if exit_code == 0:
        return OK if ok is True and state in ("committed", None) else INFO
    if ok is False and state == "unchanged":
        return FAIL
    return INFO


def read_history(path: str) -> list[dict]:
    """Load ``history.jsonl``. A torn last line (the run was killed mid-write) is skipped."""
    ops: list[dict] = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn tail of a crashed run
            raw = raw.strip()
            if raw:
                ops.append(json.loads(raw))
    return ops


@dataclass(frozen=True)
class Pair:
    """An invocation and its completion (``None`` while still open)."""

    invoke: dict
    completion: dict | None

    @property
    def type(self) -> str:
        return self.completion["type"] if self.completion else INFO


def pairs(history: Iterable[dict], include_nemesis: bool = False) -> Iterator[Pair]:
    """Pair each invoke with the next completion of the same process, in invoke order.

    Ops still open at the end of the history are yielded with ``completion=None``
    (indeterminate, like ``info``).
    """
    open_by_process: dict = {}
    order: list[dict] = []
    done: dict[int, dict] = {}
    for op in history:
        if op.get("process") == "nemesis" and not include_nemesis:
            continue
        if op["type"] == INVOKE:
            open_by_process[op["process"]] = op
            order.append(op)
        elif op["type"] in COMPLETIONS:
            inv = open_by_process.pop(op["process"], None)
            if inv is not None:
                done[inv["index"]] = op
    for inv in order:
        yield Pair(inv, done.get(inv["index"]))


def client_ops(history: Iterable[dict]) -> list[dict]:
    return [op for op in history if op.get("process") != "nemesis"]
