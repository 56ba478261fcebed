"""An outside backend written as a Python class: its factory, ``"module:function"``.

Both protocols open one the same way (``backends.registry`` for the
work-claim contract, ``backends.issuelock`` for the issue-lock one), so the
loader lives below both.
"""

from __future__ import annotations

import importlib


class UnknownBackend(ValueError):
    pass


def load_factory(ref):
    """The callable ``ref`` names (``"package.module:function"``); ``UnknownBackend`` if it cannot be loaded."""
    if not isinstance(ref, str) or ":" not in ref:
        raise UnknownBackend('a "python" backend needs "factory": "module:function"')
    module_name, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise UnknownBackend(f"cannot load backend factory {ref!r}: {e}") from None
