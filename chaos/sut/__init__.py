"""The systems under test: one module per backend, each exposing ``SUT``.

    from chaos import sut
    b = sut.get("postgres")                 # UsageError for an unknown name
    b.abilities({"dsn": None})["kill"]      # Ability(ok, how, via="server")
    b.target(cfg, run, note_pid, note_dir)  # what chaos run drives
    b.conform_session(options)              # what chaos conform replays against
    sut.names(runs=True)                    # the list of backends, derived here only

This package IS the list of backends: a module ``chaos/sut/<name>.py`` with a
``SUT`` object (a ``chaos.sut.base.Sut``) is a backend of ``chaos run``,
``chaos conform``, ``chaos doctor``, the nemeses and ``chaos backend``, with
nothing else to edit. ``abilities.py`` and ``base.py`` are the shared parts.
"""

from __future__ import annotations

import importlib
import pkgutil

from chaos.errors import UsageError
from chaos.sut import base
from chaos.sut.abilities import ABILITIES, Abilities, Ability, can, cannot
from chaos.sut.base import Sut, Target

__all__ = ["ABILITIES", "Abilities", "Ability", "Sut", "Target", "all_suts", "can", "cannot", "get", "names"]

_SHARED = {"abilities", "base"}
_cache: list[Sut] | None = None


def all_suts() -> list[Sut]:
    """Every backend module's ``SUT``, in listing order."""
    global _cache
    if _cache is None:
        found = []
        for info in pkgutil.iter_modules(__path__):
            if info.name in _SHARED or info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append(module.SUT)   # a backend module without SUT is a bug: let it raise
        _cache = sorted(found, key=lambda s: (s.order, s.name))
        base.LISTED[:] = _cache   # a Sut refusing an option names the backends that take it
    return list(_cache)


def names(*, runs: bool | None = None, conforms: bool | None = None, cli: bool | None = None) -> list[str]:
    out = []
    for s in all_suts():
        if runs is not None and s.runs != runs:
            continue
        if conforms is not None and s.conforms != conforms:
            continue
        if cli is not None and s.cli != cli:
            continue
        out.append(s.name)
    return out


def get(name: str, *, runs: bool = False, conforms: bool = False) -> Sut:
    """The backend called ``name`` (``UsageError`` naming the known ones)."""
    for s in all_suts():
        if s.name == name and (not runs or s.runs) and (not conforms or s.conforms):
            return s
    what = "chaos run" if runs else "chaos conform" if conforms else "the suite"
    known = names(runs=True if runs else None, conforms=True if conforms else None)
    raise UsageError(f"unknown backend {name!r} for {what} (known: {', '.join(known)})")
