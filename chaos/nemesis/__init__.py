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
  machine mechanisms it needs (``faketime``, ``failsync``), checked by ``supported``;
  ``needs``: further backend abilities (``chaos.sut.abilities``).

Which implementation a nemesis name gets is the backend's decision, not a
table here: ``build(name, opts)`` asks ``chaos.sut.get(opts["backend"])`` for
the ability of the same name; a missing one is ``NemesisRefused`` with its
reason, a present one names the mechanism (``via``) that picks the package
(``kill`` by ``server`` for PostgreSQL, by ``workers`` elsewhere).

``compose_packages(names, opts)`` unions packages into one nemesis generator
and one executor table. ``Coverage`` counts, per requested fault, how often it
fired and how often it demonstrably took effect (a run in which a requested
fault never took effect is ``unknown``, never ``valid``).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable

# the parts every package is made of (chaos.nemesis.base), named here too for their users
from chaos.nemesis.base import FaultCycle, Package, backend_of, draw_targets, stopped_reason, sut_options  # noqa: F401
from workloads.generator import Gen, any_of, deadline, nemesis as on_nemesis

DEFAULT_ORDER = ("kill", "pause", "clock", "fsync", "lost-reply", "restart")
#: faults that exist but run only when asked for by name (never in the default selection)
OPT_IN = ("power-loss", "partition")


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


def _registry() -> dict:
    """nemesis -> {mechanism (the ability's ``via``) -> ``package(opts)``}."""
    from chaos.nemesis import clock, docker, io, partition, power, process, server

    return {
        "kill": {"workers": process.kill_package, "server": server.kill_package, "docker-api": docker.kill_package},
        "pause": {"workers": process.pause_package, "server": server.pause_package,
                  "docker-api": docker.pause_package},
        "restart": {"workers": process.restart_package, "docker-api": docker.restart_package},
        "clock": {"workers": clock.package},
        "fsync": {"workers": io.fsync_package, "server": server.fsync_package},
        "lost-reply": {"exit-after-commit": io.lost_reply_package, "proxy": server.lost_reply_package},
        "power-loss": {"powerloss-shim": power.package},
        "partition": {"worker-proxies": partition.package},
    }


class NemesisRefused(ValueError):
    """The backend lacks an ability this nemesis needs (one line, the reason)."""


def build(name: str, opts: dict) -> Package:
    """The package ``name`` for the backend in ``opts``: the backend's ability
    of the same name says whether it exists and by which mechanism (``via``);
    the package's own ``needs`` (more abilities) are checked too."""
    impls = _registry().get(name)
    if impls is None:
        raise KeyError(name)
    backend = backend_of(opts)
    table = backend.abilities(sut_options(opts))
    ability = table[name]
    if not ability.ok:
        raise NemesisRefused(f"{name}: {ability.how}")
    if ability.via not in impls:
        raise NemesisRefused(f"{name}: no nemesis for mechanism {ability.via!r} of {backend.name}")
    pkg = impls[ability.via](opts)
    why = table.missing(pkg.needs)
    if why:
        raise NemesisRefused(f"{name}: {why}")
    return pkg


class _Named(dict):
    """name -> ``package(opts)`` (the backend is ``opts["backend"]``, default sqlite)."""

    def __missing__(self, key):
        if key not in _registry():
            raise KeyError(key)
        return lambda opts: build(key, opts)

    def __iter__(self):
        return iter(_registry())

    def __contains__(self, key):
        return key in _registry()

    def keys(self):
        return _registry().keys()


#: name -> ``package(opts) -> Package``
NEMESES: dict = _Named()


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


def support(backend: str, opts: dict | None = None) -> dict[str, tuple[bool, str]]:
    """Per nemesis: (works here, what it hits or why not). ``opts`` are the
    backend options (dsn, command, profile, factory) and nemesis opts."""
    have = mechanisms()
    out = {}
    for name in DEFAULT_ORDER + OPT_IN:
        try:
            pkg = build(name, {"workers": 1, **dict(opts or {}), "backend": backend})
        except NemesisRefused as e:
            out[name] = (False, str(e).partition(": ")[2])
            continue
        missing = [m for m in pkg.requires if not have.get(m, (False, ""))[0]]
        if missing:
            out[name] = (False, f"needs {', '.join(missing)}: {'; '.join(have[m][1] for m in missing)}")
        else:
            out[name] = (True, backend_of({"backend": backend}).abilities(sut_options(opts or {}))[name].how)
    return out


def supported(backend: str, opts: dict | None = None) -> list[str]:
    """The nemeses that work for ``backend`` on this machine (default selection)."""
    return [name for name, (ok, _) in support(backend, opts).items() if ok and name in DEFAULT_ORDER]


def _scaled(pkg: Package, scale: float) -> Package:
    """A slow backend (``chaos.timing``): the gaps between faults grow with
    ``sqrt(scale)``, so it gets fewer faults per second than a fast one but
    more per operation (per-operation parity would leave a two-minute run of a
    process-per-call program with a handful of faults). A fault's own duration
    stays (a pause still outlasts a lease as designed); a package that must
    overlap whole calls scales its own (the fsync window, ``chaos.nemesis.io``)."""
    gen = pkg.generator
    if scale == 1.0 or not isinstance(gen, FaultCycle):
        return pkg
    k = scale ** 0.5
    gap = (int(gen.gap_ms[0] * k), int(gen.gap_ms[1] * k))
    return replace(pkg, generator=replace(gen, gap_ms=gap))


def compose_packages(names, opts: dict, until: int | None = None) -> tuple[Gen | None, dict, list[Package]]:
    """Union of the named packages: (nemesis generator, {f: (package, execute)}, packages).

    ``until`` (ns from the run's start): no fault starts then or later, but a
    fault that started before is still healed on its schedule, however late the
    nemesis thread comes to it (a 10-s stuck restart once held an fsync window
    open through a whole run's extension, and no armed lost reply could commit)."""
    pkgs = []
    for name in names:
        if name not in NEMESES.keys():
            raise KeyError(name)
        pkgs.append(_scaled(build(name, opts), opts.get("scale") or 1.0))
    table = {}
    for p in pkgs:
        table[p.name] = p
        for h in p.heals:
            table[h] = p
    gens = [p.generator if until is None else deadline(until, p.generator, keep=_heal_of(p)) for p in pkgs]
    gen = on_nemesis(any_of(*gens)) if pkgs else None
    return gen, table, pkgs


def _heal_of(pkg: Package) -> Callable:
    heals = frozenset(pkg.heals)
    return lambda op: op["f"] in heals
