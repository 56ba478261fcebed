"""A black-box issue-lock program with a planted bug, for tests/test_deterministic_issuelock.py: the suite's
issue-lock CLI (``chaos lock-backend sqlite ARGS``) over one of ``chaos.testing.issuelock_bugs`` (the SQLite
store with one rule broken) instead of the store itself. ``python planted_lock_cli.py BUG ARGS``."""

import os
import sys

from chaos.cli import main
from chaos.commands import lock_backend
from chaos.testing import issuelock_bugs

bug = sys.argv[1]
lock_backend.spec_for = lambda _name, store: {"protocol": "issue-lock", "backend": "python",
                                              "factory": issuelock_bugs.factory_ref(bug),
                                              "path": os.path.join(os.path.abspath(store), "locks.db")}
sys.exit(main(["lock-backend", "sqlite", *sys.argv[2:]]))
