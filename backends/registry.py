"""Open a backend from a plain-data spec.

A spec is a dict such as ``{"backend": "sqlite", "path": "/tmp/x/claims.db",
"namespaces": ["wbns_..."]}``. By convention each backend package
``backends.<name>`` exposes ``open_backend(spec, clock, hooks) -> Backend``;
this module only finds it, so adding a backend needs no edit here.
"""

from __future__ import annotations

import importlib

from backends.api import Backend, Clock, FileClock, Hooks, SystemClock

KNOWN = ("reference", "sqlite", "postgres", "gitjournal", "external")


class UnknownBackend(ValueError):
    pass


def clock_for(spec: dict) -> Clock:
    """The physical clock a spec asks for: a shared clock file, else the system clock."""
    path = spec.get("clock_file")
    return FileClock(path) if path else SystemClock()


def open_backend(spec: dict, clock: Clock | None = None, hooks: Hooks | None = None) -> Backend:
    name = spec.get("backend")
    if name not in KNOWN:
        raise UnknownBackend(f"unknown backend {name!r} (known: {', '.join(KNOWN)})")
    module = importlib.import_module(f"backends.{name}")
    return module.open_backend(spec, clock or clock_for(spec), hooks or Hooks())
