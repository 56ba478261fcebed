"""Candidate-ledger validation for ``publish-claimed`` step 5 (contract §6,
ledger-item.md §4.5).

The item validator lives in ``backends.contract.ledger_item`` (owned by
another module author) with the signature
``validate_candidate(candidate: bytes, item_id: str, display_path: str)``
returning ``None`` (valid), a shape-A dict ``{item_id, reason}`` or a sorted
shape-B issue list. Until it is importable, a minimal fallback accepts only
bytes that open with a ``---`` front matter carrying ``id: <item_id>``.

``ledger_invalid_details`` adds the engine's own shape-A reason,
``item-not-found`` (no current bytes for the tuple), in its place in the
reason order: parse failure, then item-not-found, then item-id-mismatch.
"""

from __future__ import annotations

import importlib
import re
from typing import Callable

Validator = Callable[[bytes, str, str], "list[dict] | dict | None"]


def display_path(item_id: str) -> str:
    """The path a ledger issue names for the target item."""
    return f"ledger/{item_id}.md"


def _fallback(candidate: bytes, item_id: str, path: str) -> list[dict] | dict | None:
    try:
        text = candidate.decode("utf-8")
    except UnicodeDecodeError:
        return {"item_id": item_id, "reason": "malformed-frontmatter"}
    lines = text.split("\n")
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        return {"item_id": item_id, "reason": "malformed-frontmatter"}
    front = lines[1:lines.index("---", 1)]
    ids = [m.group(1) for line in front if (m := re.fullmatch(r"id: (\S+)", line))]
    if ids != [item_id]:
        return {"item_id": item_id, "reason": "item-id-mismatch"}
    return None


def validator() -> Validator:
    """The real validator when ``ledger_item`` is importable, else the fallback."""
    try:
        module = importlib.import_module("backends.contract.ledger_item")
    except ImportError:
        return _fallback
    return getattr(module, "validate_candidate", _fallback)


def ledger_invalid_details(candidate: bytes, item_id: str, current: bytes | None) -> list[dict] | dict | None:
    """``None`` when the candidate may be published, else ``ledger-invalid`` details."""
    found = validator()(candidate, item_id, display_path(item_id))
    if isinstance(found, dict) and found.get("reason") != "item-id-mismatch":
        return found  # a parse failure outranks item-not-found
    if current is None:
        return {"item_id": item_id, "reason": "item-not-found"}
    return found or None  # an empty issue list also means valid
