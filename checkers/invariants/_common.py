"""Shared plumbing of the invariant checkers: one pass over the history that
pairs invocations with completions, safe accessors into envelopes, backend
instants as integer milliseconds, and the result / anomaly builders.

Every checker is a pure function ``check(history, ctx) -> dict``. They share
one prepared view of the history (``prepare``); inside ``shared_preparation``
(which ``checkers.run_checkers`` uses) it is built once, so running eight
checkers costs one pairing pass.

Real-time order is the order of the history file: op A *precedes* op B when
A's completion was appended before B's invocation. Backend time is only ever
taken from replies (``observed_at``, ``issued_at``, ``expires_at``); worker
clocks are never consulted.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Iterable

from backends.contract.values import parse_instant

INVOKE = "invoke"
COMPLETIONS = frozenset(("ok", "fail", "info"))
#: at most this many anomalies are kept per checker; the total is in stats
MAX_ANOMALIES = 200


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


# --------------------------------------------------------------------------- envelope accessors


def obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def read_back_of(op: Op) -> dict | None:
    """The read_back-shaped object of a reply: ``result.read_back``,
    ``result.claim_read_back`` or read_back-shaped error details."""
    if op.env is None:
        return None
    r = op.result()
    rb = r.get("read_back") or r.get("claim_read_back")
    if isinstance(rb, dict):
        return rb
    d = op.details()
    if "last_epoch" in d and "observed_at" in d:
        return d
    return None


def observed_at(op: Op) -> str | None:
    """The backend's decision / observation time carried by the reply."""
    rb = read_back_of(op)
    if rb is not None and isinstance(rb.get("observed_at"), str):
        return rb["observed_at"]
    t = op.details().get("observed_at")
    return t if isinstance(t, str) else None


def epoch_int(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit() and (value == "0" or value[0] != "0"):
        return int(value)
    return None


_day_ms: dict[str, int] = {}


def instant_ms(value: Any) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> ms since the Unix epoch, or ``None``
    when malformed (the envelopes checker reports malformed instants)."""
    if not isinstance(value, str) or len(value) != 24:
        return None
    day = _day_ms.get(value[:10])
    try:
        if day is None:
            day = parse_instant(value[:10] + "T00:00:00.000Z")
            _day_ms[value[:10]] = day
        parse = value[10] == "T" and value[13] == ":" and value[16] == ":" and value[19] == "." and value[23] == "Z"
        if not parse:
            return None
        h, m, s, ms = int(value[11:13]), int(value[14:16]), int(value[17:19]), int(value[20:23])
    except (ValueError, TypeError):
        return None
    if h > 23 or m > 59 or s > 59:
        return None
    return day + ((h * 60 + m) * 60 + s) * 1000 + ms


def fmt_tuple(t: tuple[str, str] | None) -> str:
    return f"({t[0]}, {t[1]})" if t else "(?)"


# --------------------------------------------------------------------------- real-time monotonicity


def realtime_regressions(
    prep: Prepared,
    key_of: Callable[[Op], Any],
    source_of: Callable[[Op], Any],
    observe_of: Callable[[Op], Any],
) -> list[tuple[Op, Any, Any, Op]]:
    """Every op B whose observed value is smaller than a source value of an op
    A with the same key that *completed before B was invoked*.

    Returns ``(B, observed, source_value, A)``. One pass over the events with
    a running maximum per key: O(n).
    """
    completed_max: dict[Any, tuple[Any, Op]] = {}
    snapshot: dict[int, tuple[Any, Op]] = {}
    out: list[tuple[Op, Any, Any, Op]] = []
    for _pos, is_comp, op in prep.events:
        k = key_of(op)
        if k is None:
            continue
        if not is_comp:
            m = completed_max.get(k)
            if m is not None:
                snapshot[op.ip] = m
            continue
        s = snapshot.pop(op.ip, None)
        obs = observe_of(op)
        if s is not None and obs is not None and obs < s[0]:
            out.append((op, obs, s[0], s[1]))
        src = source_of(op)
        if src is not None:
            m = completed_max.get(k)
            if m is None or src > m[0]:
                completed_max[k] = (src, op)
    return out


# --------------------------------------------------------------------------- results


class Findings:
    """Collects anomalies with a cap, and builds the checker result."""

    def __init__(self) -> None:
        self.anomalies: list[dict] = []
        self.total = 0
        self.unknown_reasons: list[str] = []

    def add(self, type_: str, explanation: str, ops: Iterable[int | None], **data: Any) -> None:
        self.total += 1
        if len(self.anomalies) < MAX_ANOMALIES:
            idx = sorted({i for i in ops if i is not None})
            self.anomalies.append({"type": type_, "explanation": explanation, "ops": idx, "data": data})

    def unknown(self, reason: str) -> None:
        self.unknown_reasons.append(reason)

    def result(self, stats: dict | None = None) -> dict:
        stats = dict(stats or {})
        stats["anomalies_total"] = self.total
        if self.total:
            valid: bool | str = False
        elif self.unknown_reasons:
            valid = "unknown"
        else:
            valid = True
        out: dict = {"valid": valid, "anomalies": self.anomalies, "stats": stats}
        if self.unknown_reasons:
            out["unknown_reasons"] = self.unknown_reasons[:20]
        return out


def initial_revisions(ctx: dict) -> dict[tuple[str, str], str] | None:
    """Seeded ledger revisions by tuple, from ``ctx["initial_durable"]``
    (manifest-shaped) or ``ctx["initial_revisions"]`` (``{"ns/item": rev}``).
    ``None`` when the context does not say."""
    out: dict[tuple[str, str], str] = {}
    known = False
    init = ctx.get("initial_durable")
    if isinstance(init, dict) and isinstance(init.get("ledgers"), list):
        known = True
        for led in init["ledgers"]:
            if isinstance(led, dict) and isinstance(led.get("revision"), str):
                out[(led.get("ledger_namespace"), led.get("item_id"))] = led["revision"]
    revs = ctx.get("initial_revisions")
    if isinstance(revs, dict):
        known = True
        for key, rev in revs.items():
            ns, _, item = str(key).partition("/")
            out[(ns, item)] = rev
    return out if known else None
