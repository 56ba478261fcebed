"""A Git ledger: its directory, its provisioned namespace and where its
journal lives.

* items are Markdown files ``<ledger>/<item_id>.md``;
* ``<ledger>/.claim-namespace`` holds ``wbns_<32 hex>`` + LF: created once
  with O_EXCL and fsynced (plus the directory), then committed to Git with
  ``git add`` + ``git commit`` of that one file, so every clone and worktree
  of the history binds the same namespace;
* the journal directory is ``<git common dir>/claim-chaos/<namespace>/``
  (``git rev-parse --git-common-dir``), so every worktree shares it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from backends.contract import is_namespace
from backends.gitjournal import gitrepo
from backends.gitjournal.fsio import create_exclusive, read_or_none
from backends.gitjournal.journal import JOURNAL, init_journal

NAMESPACE_FILE = ".claim-namespace"
JOURNAL_ROOT = "claim-chaos"


class AlreadyProvisioned(Exception):
    pass


class NotAGitLedger(Exception):
    pass


@dataclass(frozen=True)
class Ledger:
    """A ledger directory as found on disk. ``namespace`` is None when the
    ledger is unprovisioned (advisory); ``top``/``common`` are None outside
    a git work tree."""

    path: str
    top: str | None
    common: str | None
    namespace: str | None

    @property
    def in_git(self) -> bool:
        return self.common is not None

    @property
    def ns_dir(self) -> str:
        return os.path.join(self.common, JOURNAL_ROOT, self.namespace)

    @property
    def journal(self) -> str:
        return os.path.join(self.ns_dir, JOURNAL)

    def item_path(self, item_id: str) -> str:
        return os.path.join(self.path, f"{item_id}.md")

    def relpath(self, item_id: str) -> str:
        return os.path.relpath(self.item_path(item_id), self.top)


def open_ledger(path: str) -> Ledger:
    path = os.path.realpath(path)
    found = gitrepo.locate(path)
    if found is None:
        return Ledger(path, None, None, None)
    raw = read_or_none(os.path.join(path, NAMESPACE_FILE))
    ns = None
    if raw is not None and raw.endswith(b"\n") and is_namespace(raw[:-1].decode("ascii", "replace")):
        ns = raw[:-1].decode()
    return Ledger(path, found[0], found[1], ns)


def new_namespace() -> str:
    return "wbns_" + secrets.token_hex(16)


def provision(path: str, namespace: str | None = None, commit: bool = True) -> Ledger:
    """Bind ``path`` (created if missing; must be inside a git work tree) to
    a fresh (or the given) namespace, create its journal and commit the
    namespace file. Raises ``AlreadyProvisioned`` / ``NotAGitLedger``."""
    os.makedirs(path, exist_ok=True)
    ledger = open_ledger(path)
    if not ledger.in_git:
        raise NotAGitLedger(f"{path} is not inside a git work tree")
    ns = namespace or new_namespace()
    if not is_namespace(ns):
        raise ValueError(f"not a ledger namespace: {ns!r}")
    try:
        create_exclusive(os.path.join(ledger.path, NAMESPACE_FILE), ns.encode() + b"\n")
    except FileExistsError:
        raise AlreadyProvisioned(f"{path} is already provisioned") from None
    ledger = open_ledger(path)
    init_journal(ledger.ns_dir)
    if commit:
        gitrepo.commit_paths(ledger.top, [os.path.relpath(os.path.join(ledger.path, NAMESPACE_FILE), ledger.top)],
                             f"claim-chaos: provision ledger namespace {ns}")
    return ledger
