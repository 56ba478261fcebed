"""Conformance adapters, one module per backend, found by convention.

``chaos.conform.adapters.<backend>`` exposes ``make_adapter(options) ->
Adapter`` (see ``base.py`` for the protocol). A backend that needs a resource
shared by all cases of one ``chaos conform`` run (a PostgreSQL server) also
exposes ``open_session(options) -> Session`` whose ``new_adapter()`` gives
one adapter per case and whose ``close()`` tears the resource down.
"""

from __future__ import annotations

import importlib
from typing import Callable

from chaos.errors import UsageError


class SimpleSession:
    """A session for adapters that share nothing between cases."""

    def __init__(self, make_adapter: Callable, options: dict):
        self._make = make_adapter
        self._options = options

    def new_adapter(self):
        return self._make(self._options)

    def close(self) -> None:
        return None


def open_session(backend: str, options: dict):
    """The session of ``chaos.conform.adapters.<backend>`` for ``options``."""
    module_name = f"{__name__}.{backend}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        raise UsageError(f"no conformance adapter for backend {backend!r} in this build") from None
    if hasattr(module, "open_session"):
        return module.open_session(options)
    return SimpleSession(module.make_adapter, options)
