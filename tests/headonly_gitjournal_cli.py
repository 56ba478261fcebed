"""Our Git-journal contract CLI, finalizing the other way the contract allows.

``claim-verify`` finalizes a successful publication "When HEAD contains the
committed revision" (contract §6). ``backends.gitjournal`` looks the revision
up anywhere in the history reachable from HEAD; this variant takes "HEAD
contains" literally: only the bytes HEAD itself holds. Nothing finalizes on a
publish. A publication whose bytes HEAD lost before any claim-verify ran
(another agent's commit of the item came first) is then never finalized,
which the contract allows.

    python tests/headonly_gitjournal_cli.py <the chaos backend gitjournal argv>
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.gitjournal import gitrepo  # noqa: E402

_in_history = gitrepo.revisions_in_history


def _head_only(cwd: str, relpath: str, limit: int = 500) -> list:
    """Only the newest commit touching ``relpath``: the bytes HEAD holds."""
    return _in_history(cwd, relpath, 1)


gitrepo.revisions_in_history = _head_only

if __name__ == "__main__":
    from chaos.cli import main

    sys.exit(main(["backend", "gitjournal", *sys.argv[1:]]))
