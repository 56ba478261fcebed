"""Nemeses: fault packages selected by name, with real mechanisms behind each.

A package (jepsen ``nemesis/combined.clj`` style) is::

    Package(name, generator, execute, final, targets, requires)

* ``generator``: a pure, seeded generator of nemesis ops (``FaultCycle``):
  the fault at a drawn time, then (for faults that last) its heal op after a
  drawn duration. Its op values name the target worker *slots* and the
  parameters, so the fault schedule is a pure function of ``(seed, config)``;
  draws are keyed by ``(seed, fault name, n)``, so the live run draws the very
  values ``schedule.jsonl`` plans (only the times may slip when a fault is late).
* ``execute(env, op) -> value``: performs one op on the real processes and
  returns the completion value with ``took_effect`` evidence.
* ``final(env) -> value``: heals everything this package may have broken.
* ``targets``: what it hits (``workers``, ``server``); ``requires``: the
  mechanisms it needs (``faketime``, ``failsync``), checked by ``supported``.

``compose_packages(names, opts)`` unions packages into one nemesis generator
and one executor table. ``Coverage`` counts, per requested fault, how often it
fired and how often it demonstrably took effect (a run in which a requested
fault never took effect is ``unknown``, never ``valid``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Callable

from workloads.generator import Gen, any_of, fill_op, nemesis as on_nemesis, PENDING, MS
from workloads.random import Stream

DEFAULT_ORDER = ("kill", "pause", "clock", "fsync", "lost-reply", "restart")
#: faults that exist but are only run when asked for by name (never in the default selection)
OPT_IN = ("power-loss", "partition")


@dataclass(frozen=True)
class Package:
    name: str
    generator: Gen
    execute: Callable
    final: Callable
    targets: str = "workers"
    requires: tuple = ()
    heals: tuple = ()   # the ``f`` of this package's heal ops


@dataclass(frozen=True)
class FaultCycle(Gen):
    """Fault, (heal after a drawn duration), gap, fault, ... forever.

    ``draw(stream, workers) -> (value, stream)`` draws one fault's parameters.
    ``gap_ms`` / ``dur_ms`` are ``(lo, hi)`` ranges; ``heal`` is the ``f`` of
    the heal op (None for instantaneous faults). Pure: all draws come from
    ``ctx.stream(n)``; the first fault comes one drawn gap after t=0 (the run's start), so
    re-asking later never moves it.
    """

    f: str
    draw: Callable
    workers: int
    gap_ms: tuple
    dur_ms: tuple = (0, 0)
    heal: str | None = None
    n: int = 0
    next_time: int | None = None
    pending_heal: tuple | None = None   # (time, value)

    def op(self, ctx):
        # keyed by the fault's name, not the generator's position, so the
        # planned schedule (schedule.jsonl) and the live run draw the same values
        s = Stream(ctx.seed, ("nemesis", self.f, self.n))
        if self.pending_heal is not None:
            at, value = self.pending_heal
            op = fill_op({"f": self.heal, "value": value, "time": at}, ctx)
            if op is PENDING:
                return PENDING
            gap, _ = s.randint(*self.gap_ms)
            return op, replace(self, n=self.n + 1, pending_heal=None, next_time=op["time"] + gap * MS)
        gap, s = s.randint(*self.gap_ms)
        at = gap * MS if self.next_time is None else self.next_time  # anchored at run start (t=0)
        value, s = self.draw(s, self.workers)
        op = fill_op({"f": self.f, "value": value, "time": at}, ctx)
        if op is PENDING:
            return PENDING
        if self.heal is None:
            gap2, _ = s.randint(*self.gap_ms)
            return op, replace(self, n=self.n + 1, next_time=op["time"] + gap2 * MS)
        dur, _ = s.randint(*self.dur_ms)
        return op, replace(self, n=self.n + 1, pending_heal=(op["time"] + dur * MS, value))


def draw_targets(s, workers: int, most: int = 1):
    """1..``most`` distinct worker slots."""
    k, s = s.randint(1, max(1, min(most, workers)))
    pool = list(range(workers))
    out = []
    for _ in range(k):
        i, s = s.randint(0, len(pool) - 1)
        out.append(pool.pop(i))
    return sorted(out), s


def stopped_reason(env, t: int) -> str | None:
    """Why worker slot ``t``'s live host cannot answer a command now, else None.

    A host the harness has SIGSTOPped (the pause nemesis, or a paused writer
    held at its barrier by the slot) answers nothing until it is resumed, so a
    command sent to it would block the single nemesis thread. Nemeses that talk
    to a host (restart, lost-reply, the clock evidence) skip such a target and
    record why: the planned schedule stays a pure function of the seed, only
    the executed effect differs, and the history says so."""
    slot = env.slots[t]
    pid = slot.pid
    if pid is None:
        return None
    if env.paused.get(t) == pid:
        return f"worker {pid} is paused by the pause nemesis"
    try:
        import psutil

        if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
            return f"worker {pid} is stopped (a paused writer held at its barrier)"
    except Exception:  # gone meanwhile: not stopped; the command fails fast
        return None
    return None


class Coverage:
    """Per fault: requested, fired, took_effect (thread-safe counters)."""

    def __init__(self, requested):
        self._lock = threading.Lock()
        self.table = {name: {"requested": True, "fired": 0, "took_effect": 0} for name in requested}

    def fired(self, name: str, took_effect: bool) -> None:
        with self._lock:
            row = self.table.setdefault(name, {"requested": False, "fired": 0, "took_effect": 0})
            row["fired"] += 1
            row["took_effect"] += int(bool(took_effect))

    def took_effect(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.table.setdefault(name, {"requested": False, "fired": 0, "took_effect": 0})["took_effect"] += n

    def missing(self) -> list[str]:
        """Requested faults that never took effect."""
        return [k for k, v in self.table.items() if v["requested"] and v["took_effect"] == 0]

    def to_json(self) -> dict:
        with self._lock:
            return {k: dict(v) for k, v in self.table.items()}


def _per_backend(workers_pkg: Callable, server_pkg: Callable) -> Callable:
    """``--backend postgres`` faults the server; every other backend its workers."""
    def make(opts: dict) -> Package:
        return server_pkg(opts) if opts.get("backend") == "postgres" else workers_pkg(opts)
    return make


def _registry() -> dict:
    from chaos.nemesis import clock, io, partition, power, process, server

    return {
        "kill": _per_backend(process.kill_package, server.kill_package),
        "pause": _per_backend(process.pause_package, server.pause_package),
        "restart": process.restart_package,
        "clock": clock.package,
        "fsync": _per_backend(io.fsync_package, server.fsync_package),
        "lost-reply": _per_backend(io.lost_reply_package, server.lost_reply_package),
        "power-loss": power.package,
        "partition": partition.package,
    }


#: backend -> nemesis -> what it hits and how (``chaos doctor``, docs)
TARGETS: dict[str, dict[str, str]] = {
    "sqlite": {
        "kill": "worker processes: SIGKILL + reap",
        "pause": "worker processes: SIGSTOP/SIGCONT",
        "clock": "worker wall clocks: libfaketime (backward, forward, strobe)",
        "fsync": "worker fsyncs: EIO shim",
        "lost-reply": "workers: exit(137) right after a commit, before the reply",
        "restart": "worker processes: drop state, reopen the store",
        "power-loss": "the SQLite file and journal: every change no fsync covers is undone (preload shim)",
    },
    "postgres": {
        "kill": "the PostgreSQL server tree: SIGKILL, restart with crash recovery",
        "pause": "the PostgreSQL server: cgroup freezer (root) or SIGSTOP snapshot",
        "clock": "worker wall clocks (the service's clock is authoritative): libfaketime",
        "fsync": "the PostgreSQL server: EIO shim preloaded, PANIC, restart at the heal",
        "lost-reply": "fault proxy in front of the server: replies dropped for a window",
        "partition": "per-worker proxies: some workers lose the server (blackhole or refused) while the rest go on",
        "restart": "worker processes: drop state and connection, reopen",
    },
    "gitjournal": {
        "kill": "worker processes: SIGKILL + reap (a held journal lock is recovered from its dead owner)",
        "pause": "worker processes: SIGSTOP/SIGCONT (a held lock makes others wait, then busy)",
        "clock": "worker wall clocks: libfaketime (backward, forward, strobe)",
        "fsync": "worker fsyncs (journal appends, item files): EIO shim",
        "lost-reply": "workers: exit(137) right after a commit, before the reply",
        "restart": "worker processes: drop state, re-read the ledgers",
        "power-loss": "the repository (journals, item files, git objects and refs): un-fsynced changes undone",
    },
    "external": {
        "kill": "worker hosts and their running CLI child: SIGKILL the tree",
        "pause": "worker hosts and their running CLI child: SIGSTOP/SIGCONT",
        "clock": "worker + CLI wall clocks (inherited preload): libfaketime",
        "fsync": "CLI fsyncs (inherited preload): EIO shim",
        "lost-reply": "workers: exit(137) after the CLI answered exit 0, before the reply",
        "restart": "worker hosts: drop state (each op is a fresh CLI process anyway)",
        "power-loss": "the ledger directory the CLI writes: un-fsynced changes undone (inherited preload)",
    },
}

#: nemeses that need a server of our own (never faulted when the user gave --dsn)
# an outside Python backend runs inside the worker processes, like sqlite
TARGETS["python"] = dict(TARGETS["sqlite"])

OWN_SERVER = {"postgres": ("kill", "pause", "fsync")}


class _Lazy(dict):
    def __missing__(self, key):
        self.update(_registry())
        if key not in self:
            raise KeyError(key)
        return dict.__getitem__(self, key)

    def __iter__(self):
        self.update(_registry())
        return dict.__iter__(self)

    def keys(self):
        self.update(_registry())
        return dict.keys(self)


#: name -> ``package(opts) -> Package``
NEMESES: dict = _Lazy()


def mechanisms() -> dict:
    """Which fault mechanisms work here: name -> (ok, detail)."""
    out = {}
    try:
        from chaos.faults import faketime

        out["faketime"] = (True, faketime.library_path())
    except Exception as e:
        out["faketime"] = (False, f"{type(e).__name__}: {e}")
    try:
        from chaos.faults import failsync

        out["failsync"] = (True, failsync.build())
    except Exception as e:
        out["failsync"] = (False, f"{type(e).__name__}: {e}")
    try:
        from chaos.faults import powerloss

        out["powerloss"] = (True, powerloss.build())
    except Exception as e:
        out["powerloss"] = (False, f"{type(e).__name__}: {e}")
    return out


def support(backend: str, own_server: bool = True) -> dict[str, tuple[bool, str]]:
    """Per nemesis: (works here, what it hits or why not)."""
    have = mechanisms()
    out = {}
    for name in DEFAULT_ORDER + OPT_IN:
        what = TARGETS.get(backend, {}).get(name)
        if what is None:
            out[name] = (False, f"not available for {backend}")
            continue
        pkg = NEMESES[name]({"workers": 1, "backend": backend})
        missing = [m for m in pkg.requires if not have.get(m, (False, ""))[0]]
        if missing:
            out[name] = (False, f"needs {', '.join(missing)}: {'; '.join(have[m][1] for m in missing)}")
        elif not own_server and name in OWN_SERVER.get(backend, ()):
            out[name] = (False, "needs a server started by chaos run (never faults a --dsn server)")
        else:
            out[name] = (True, what)
    return out


def supported(backend: str, own_server: bool = True) -> list[str]:
    """The nemeses that work for ``backend`` on this machine (default selection)."""
    return [name for name, (ok, _) in support(backend, own_server).items() if ok and name in DEFAULT_ORDER]


def compose_packages(names, opts: dict) -> tuple[Gen | None, dict, list[Package]]:
    """Union of the named packages: (nemesis generator, {f: (package, execute)}, packages)."""
    pkgs = []
    for name in names:
        if name not in NEMESES.keys():
            raise KeyError(name)
        pkgs.append(NEMESES[name](opts))
    table = {}
    for p in pkgs:
        table[p.name] = p
        for h in p.heals:
            table[h] = p
    gen = on_nemesis(any_of(*[p.generator for p in pkgs])) if pkgs else None
    return gen, table, pkgs
