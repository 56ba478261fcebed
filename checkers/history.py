"""History records: reading, pairing invokes with completions, classifying replies.

A history is a list of dicts, one per line of ``history.jsonl`` (see
docs/architecture.md): ``index, time, process, type, f, value`` and, on
harness-side failures, ``error``. This module is shared by the runner (which
classifies replies as it records them) and by every checker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from backends import safeload

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)

#: exit-6 codes whose reply proves nothing about durable state
_UNCERTAIN_EXIT6 = frozenset(
    {"clock-floor-persistence-failed", "publication-outcome-unknown", "claim-store-unavailable"}
)


def classify(exit_code: int | None, envelope: dict | None) -> str:
    """``ok`` / ``fail`` / ``info`` for one reply, as design.md defines them.

    ``fail`` only when the reply proves nothing changed; anything uncertain is
    ``info``. ``None`` for either argument (no reply at all) is ``info``.
    """
    if exit_code is None or not isinstance(envelope, dict):
        return INFO
    state = envelope.get("state")
    if exit_code == 0:
        return OK if envelope.get("ok") is True else INFO
    code = (envelope.get("error") or {}).get("code") if isinstance(envelope.get("error"), dict) else None
    if exit_code in (2, 3, 4, 5) and state == "unchanged":
        return FAIL
    if exit_code == 6 and state == "unchanged" and code == "epoch-exhausted":
        return FAIL
    if exit_code == 6 and code in _UNCERTAIN_EXIT6:
        return INFO
    return INFO


def read_history(path: str) -> list[dict]:
    """Load ``history.jsonl``. A torn last line (the run was killed mid-write) is skipped."""
    ops: list[dict] = []
    for n, raw in safeload.json_lines(path):
        if not raw.endswith(b"\n"):
            break  # torn tail of a crashed run
        raw = raw.strip()
        if raw:
            try:
                ops.append(safeload.json_line(raw))
            except ValueError as e:
                raise safeload.LoadError(f"history {path}: line {n} is not JSON ({e})") from None
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
