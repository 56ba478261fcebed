"""Open a backend from a plain-data spec.

A spec with ``"protocol": "issue-lock"`` opens an issue-lock store instead
(``backends.issuelock``: ``sqlite``, ``gitfile``, ``external``, ``python``).

A spec is a dict such as ``{"backend": "sqlite", "path": "/tmp/x/claims.db",
"namespaces": ["wbns_..."]}``. By convention each backend package
``backends.<name>`` exposes ``open_backend(spec, clock, hooks) -> Backend``;
this module only finds it (``known()`` lists the packages), so adding a
backend needs no edit here.

An outside backend written as a Python class plugs in with
``{"backend": "python", "factory": "package.module:open_backend", ...}``: the
factory has the same signature (``backends.factory`` loads it, for both
protocols).
"""

from __future__ import annotations

import importlib
import pkgutil

from backends.api import Backend, Clock, FileClock, Hooks, SystemClock
from backends.factory import UnknownBackend, load_factory

__all__ = ["UnknownBackend", "clock_for", "known", "open_backend"]


def _packages() -> list[str]:
    import backends

    return sorted(m.name for m in pkgutil.iter_modules(backends.__path__) if m.ispkg)


def known() -> list[str]:
    """The packages of ``backends/`` that open a backend (plus ``python``)."""
    return [n for n in _packages() if hasattr(importlib.import_module(f"backends.{n}"), "open_backend")] + ["python"]


def clock_for(spec: dict) -> Clock:
    """The physical clock a spec asks for: a shared clock file, else the system clock."""
    path = spec.get("clock_file")
    return FileClock(path) if path else SystemClock()


def open_backend(spec: dict, clock: Clock | None = None, hooks: Hooks | None = None) -> Backend:
    if spec.get("protocol") == "issue-lock":  # the second protocol's stores (backends.issuelock)
        from backends import issuelock

        return issuelock.open_store(spec, clock or clock_for(spec), hooks or Hooks())
    name = spec.get("backend")
    if name == "python":
        factory = load_factory(spec.get("factory"))
    else:
        module = importlib.import_module(f"backends.{name}") if name in _packages() else None
        factory = getattr(module, "open_backend", None)
        if factory is None:
            raise UnknownBackend(f"unknown backend {name!r} (known: {', '.join(known())})")
    return factory(spec, clock or clock_for(spec), hooks or Hooks())
