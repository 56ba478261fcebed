"""Raw records, paired: the view for protocols the compact ``History`` does
not model (the issue lock, ``checkers.issuelock``).

``prepare(history)`` pairs each invoke with the next completion of its
process in one pass and keeps the raw request and reply dicts (``Op.req``,
``Op.env``); inside ``shared_preparation`` it is built once per history.
The work-claim checkers read ``checkers.history.History`` instead: parsed
once, compact, and without the raw dicts.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any

INVOKE = "invoke"
COMPLETIONS = frozenset(("ok", "fail", "info"))


class Op:
    """One client operation: its invocation and (maybe) its completion.

    ``ip``/``cp`` are positions in the history list (real-time order);
    ``i``/``c`` the ``index`` members (what anomalies cite). ``type`` is
    ``info`` for an op still open at the end of the history.
    """

    __slots__ = ("i", "c", "ip", "cp", "process", "f", "req", "type", "exit", "env")

    def __init__(self, ip: int, inv: dict):
        self.ip = ip
        self.i = inv.get("index", ip)
        self.cp: int | None = None
        self.c: int | None = None
        self.process = inv.get("process")
        self.f = inv.get("f")
        v = inv.get("value")
        self.req: dict = v if isinstance(v, dict) else {}
        self.type = "info"
        self.exit: int | None = None
        self.env: dict | None = None

    def complete(self, cp: int, comp: dict) -> None:
        self.cp = cp
        self.c = comp.get("index", cp)
        self.type = comp.get("type", "info")
        v = comp.get("value")
        if isinstance(v, dict):
            ex = v.get("exit")
            self.exit = ex if isinstance(ex, int) and not isinstance(ex, bool) else None
            env = v.get("envelope")
            self.env = env if isinstance(env, dict) else None

    @property
    def indices(self) -> list[int]:
        return [self.i] if self.c is None else [self.i, self.c]

    @property
    def definite(self) -> bool:
        """The reply proves what happened (``ok`` or ``fail``)."""
        return self.type in ("ok", "fail") and self.env is not None

    @property
    def uncertain(self) -> bool:
        """It may or may not have taken effect (``info`` or never completed)."""
        return self.type not in ("ok", "fail")

    def tuple(self) -> tuple[str, str] | None:
        ns, item = self.req.get("ledger_namespace"), self.req.get("item_id")
        if isinstance(ns, str) and isinstance(item, str):
            return (ns, item)
        return None

    def code(self) -> str | None:
        err = self.env.get("error") if self.env else None
        return err.get("code") if isinstance(err, dict) else None

    def result(self) -> dict:
        r = self.env.get("result") if self.env else None
        return r if isinstance(r, dict) else {}

    def details(self) -> dict:
        err = self.env.get("error") if self.env else None
        d = err.get("details") if isinstance(err, dict) else None
        return d if isinstance(d, dict) else {}

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Op({self.f} {self.type} i={self.i} c={self.c} p={self.process})"


class Prepared:
    """The history, paired once: ``ops`` in invoke order, ``events`` as
    ``(position, is_completion, op)`` in history order, and the optional
    ``final-state`` durable projection written by the runner."""

    __slots__ = ("ops", "events", "final_durable", "final_index", "history_len")

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.events: list[tuple[int, bool, Op]] = []
        self.final_durable: dict | None = None
        self.final_index: int | None = None
        self.history_len = 0


_cache: list = [None, None, 0]  # [history object, Prepared, depth of shared_preparation scopes]


@contextlib.contextmanager
def shared_preparation(history: list[dict]):
    """Within this scope, every checker reuses one ``prepare(history)``: the
    history must not change meanwhile. Outside it nothing is cached, so a
    caller that edits a history and re-checks it always gets a fresh view."""
    _cache[2] += 1
    try:
        yield
    finally:
        _cache[2] -= 1
        if _cache[2] == 0:
            _cache[0] = _cache[1] = None


def prepare(history: list[dict]) -> Prepared:
    """Pair invocations with completions of the same process (one pass)."""
    if _cache[2] and _cache[0] is history and _cache[1].history_len == len(history):
        return _cache[1]
    p = Prepared()
    open_by_process: dict[Any, Op] = {}
    # millions of small allocations and no cycles: the cyclic GC only costs time here
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        _pair(history, p, open_by_process)
    finally:
        if was_enabled:
            gc.enable()
    p.history_len = len(history)
    if _cache[2]:
        _cache[0], _cache[1] = history, p
    return p


def _pair(history: list[dict], p: Prepared, open_by_process: dict) -> None:
    for pos, rec in enumerate(history):
        proc = rec.get("process")
        if proc == "nemesis":
            if rec.get("f") == "final-state":
                v = rec.get("value")
                d = v.get("durable") if isinstance(v, dict) else None
                if isinstance(d, dict):
                    p.final_durable, p.final_index = d, rec.get("index", pos)
            continue
        t = rec.get("type")
        if t == INVOKE:
            op = Op(pos, rec)
            open_by_process[proc] = op
            p.ops.append(op)
            p.events.append((pos, False, op))
        elif t in COMPLETIONS:
            op = open_by_process.pop(proc, None)
            if op is not None:
                op.complete(pos, rec)
                p.events.append((pos, True, op))
