"""Shared plumbing of the invariant checkers: the history type they all read
(``checkers.history.History``, built once per history), formatting helpers,
real-time monotonicity and the result / anomaly builders.

Every checker is a pure function ``check(history, ctx) -> dict`` where
``history`` is a ``History`` or a list of records (then read once here).
``checkers.run_checkers`` reads the history once and hands the same
``History`` to every checker.

Real-time order is the order of the history file: op A *precedes* op B when
A's completion was appended before B's invocation. Backend time is only ever
taken from replies (``observed_at``, ``issued_at``, ``expires_at``); worker
clocks are never consulted.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from backends.contract.values import format_instant
from checkers.history import BAD, History, Op, epoch_int, instant_ms  # noqa: F401 - re-exported for the checkers

#: at most this many anomalies are kept per checker; the total is in stats
MAX_ANOMALIES = 200
#: ... except that the first few of every type are kept past that cap: a flood
#: of one type (hundreds of broken revision chains) must not hide that another
#: rule broke too (the planted exact-bytes bug showed only its chain breaks)
KEPT_PER_TYPE = 5


def prepare(history) -> History:
    """The ``History`` of ``history`` (itself when it already is one)."""
    return History.of(history)


def fmt_tuple(t: tuple[str, str] | None) -> str:
    return f"({t[0]}, {t[1]})" if t else "(?)"


def at(ms: int | None) -> str:
    """A backend time as the contract writes it."""
    if ms is None:
        return "?"
    try:
        return format_instant(ms)
    except (ValueError, TypeError, OverflowError):
        return str(ms)


def active_text(a: tuple | None) -> str:
    """An active claim tuple in plain words."""
    if a is None:
        return "no active claim"
    if a is BAD or len(a) != 4:
        return "a malformed active claim"
    return f"{a[0]!r} epoch {a[1]} [{at(a[2])}, {at(a[3])})"


def obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# --------------------------------------------------------------------------- real-time monotonicity


def realtime_regressions(
    prep: History,
    key_of: Callable[[Op], Any],
    source_of: Callable[[Op], Any],
    observe_of: Callable[[Op], Any],
) -> list[tuple[Op, Any, Any, Op]]:
    """Every op B whose observed value is smaller than a source value of an op
    A with the same key that *completed before B was invoked*.

    Returns ``(B, observed, source_value, A)``. One pass over the events with
    a running maximum per key: O(n); ``key_of`` is asked once per op, the
    others once per completion.
    """
    ops = prep.ops
    keys = [key_of(op) for op in ops]
    completed_max: dict[Any, tuple[Any, Op]] = {}
    snapshot: dict[int, tuple[Any, Op]] = {}
    out: list[tuple[Op, Any, Any, Op]] = []
    get = completed_max.get
    for v in prep.events:
        n = v >> 1
        k = keys[n]
        if k is None:
            continue
        if not v & 1:
            m = get(k)
            if m is not None:
                snapshot[n] = m
            continue
        op = ops[n]
        s = snapshot.pop(n, None)
        if s is not None:
            obs = observe_of(op)
            if obs is not None and obs < s[0]:
                out.append((op, obs, s[0], s[1]))
        src = source_of(op)
        if src is not None:
            m = get(k)
            if m is None or src > m[0]:
                completed_max[k] = (src, op)
    return out


def once(h: History, name: str, checker: Callable, ctx: dict) -> dict:
    """``checker(h, ctx)``, computed once per history and context (a checker
    that builds on another's verdict asks through this)."""
    key = ("result", name, id(ctx))
    got = h.derived.get(key)
    if got is None or got[0] is not ctx:
        got = h.derived[key] = (ctx, checker(h, ctx))
    return got[1]


# --------------------------------------------------------------------------- results


class Findings:
    """Collects anomalies with a cap (``MAX_ANOMALIES``, and ``KEPT_PER_TYPE``
    of every type past it), counts them per type, and builds the checker result."""

    def __init__(self) -> None:
        self.anomalies: list[dict] = []
        self.total = 0
        self.by_type: dict[str, int] = {}
        self.unknown_reasons: list[str] = []

    def add(self, type_: str, explanation: str, ops: Iterable[int | None], **data: Any) -> None:
        self.total += 1
        seen = self.by_type.get(type_, 0)
        self.by_type[type_] = seen + 1
        if len(self.anomalies) < MAX_ANOMALIES or seen < KEPT_PER_TYPE:
            idx = sorted({i for i in ops if i is not None})
            self.anomalies.append({"type": type_, "explanation": explanation, "ops": idx, "data": data})

    def unknown(self, reason: str) -> None:
        self.unknown_reasons.append(reason)

    def result(self, stats: dict | None = None) -> dict:
        stats = dict(stats or {})
        stats["anomalies_total"] = self.total
        if self.total:
            stats["anomalies_by_type"] = dict(sorted(self.by_type.items()))
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
