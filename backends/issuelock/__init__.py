"""The issue-lock protocol (../shared/spec/issue-lock-contract.md): contract, engine, stores.

* ``contract/``: the canonical contract, once (builder, reader, gates, codes, replies).
* ``engine.py``: the decisions, written once over a ``LockStore``.
* ``sqlite.py``: the SQLite store; ``gitfile/``: one lock file per
  remote/org/repo/issue beside real git repositories with real worktrees;
  ``external.py``: any program speaking the issue-lock CLI, driven per its profile.
* ``seed.py``: the privileged seed every store shares.

``open_store(spec, clock, hooks)`` opens the store named by ``spec["backend"]``
(``sqlite``, ``gitfile``, ``external``, or ``python`` with ``factory``); the
registry sends a spec with ``"protocol": "issue-lock"`` here.
"""

from __future__ import annotations

import importlib

from backends.factory import load_factory

STORES = {"sqlite": "backends.issuelock.sqlite", "gitfile": "backends.issuelock.gitfile",
          "external": "backends.issuelock.external"}


def open_store(spec: dict, clock, hooks):
    name = spec.get("backend")
    if name == "python":
        return load_factory(spec.get("factory"))(spec, clock, hooks)
    if name not in STORES:
        raise ValueError(f"unknown issue-lock store {name!r} (known: {', '.join(STORES)}, python)")
    return importlib.import_module(STORES[name]).open_backend(spec, clock, hooks)
