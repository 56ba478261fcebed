"""The coordinator journal of one namespace: ``journal.jsonl`` in
``<git common dir>/claim-chaos/<namespace>/``, shared by every worktree.

State is the replay of the journal; nothing else is authority. One compact
JSON object per line, appended (O_APPEND) and fsynced under the namespace
lock. Entry kinds (member ``t``):

* ``floor``        ``{ms}``: the namespace clock floor advanced to ``ms``;
* ``claim``        ``{item, last_epoch, active}``: a claim record replaced;
* ``publish-intent``  ``{op, item, digest, path, relpath, old_revision,
  candidate_revision, exit, envelope, request}``: fsynced BEFORE the item
  bytes are written (contract §6);
* ``publish-final``  ``{op, item, digest, exit, envelope, request,
  committed_revision, path, relpath}``: the terminal outcome (a success, or a
  stored rejection such as a fence refusal);
* ``publish-not-applied`` ``{op, item, reason}``: an intent whose bytes were
  never written (reconciled from the exact item bytes); a retry re-executes;
* ``publish-finalization`` ``{op, item, committed_revision, git_commit}``:
  ``claim-verify`` found the revision in Git ``HEAD`` history.

A torn last line (no LF: a writer died inside ``write``) was never
acknowledged; replay ignores it and the next writer truncates it away under
the lock. A malformed complete line is corruption: ``StoreUnavailable``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from backends.api import StoredOutcome, StoreUnavailable
from backends.contract.records import Active, ClaimRecord
from backends.contract import compact_json, format_epoch, parse_epoch
from backends.gitjournal.fsio import fsync_dir, makedirs_durable, write_all

JOURNAL = "journal.jsonl"


class JournalWriteFailed(Exception):
    """An append failed. ``rolled_back``: the appended bytes were truncated
    away again, so the journal content is exactly what it was before."""

    def __init__(self, cause: BaseException, rolled_back: bool):
        super().__init__(f"journal append failed ({cause}); rolled back: {rolled_back}")
        self.cause = cause
        self.rolled_back = rolled_back


@dataclass
class JournalState:
    floor: int | None = None
    claims: dict[str, ClaimRecord] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], StoredOutcome] = field(default_factory=dict)
    finals: dict[tuple[str, str], dict] = field(default_factory=dict)       # (op, item) -> final entry
    pending: dict[tuple[str, str], dict] = field(default_factory=dict)      # intents without a terminal entry
    not_applied: dict[tuple[str, str], dict] = field(default_factory=dict)
    finalized: dict[tuple[str, str], dict] = field(default_factory=dict)    # (op, item) -> finalization
    size: int = 0           # bytes of complete lines
    torn: bool = False      # a partial last line follows ``size``


def init_journal(ns_dir: str) -> str:
    """Create the namespace journal directory and an empty journal, fsyncing
    each new directory entry and the empty file (contract §6). Idempotent."""
    makedirs_durable(ns_dir)
    path = os.path.join(ns_dir, JOURNAL)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return path
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(ns_dir)
    return path


def claim_entry(rec: ClaimRecord) -> dict:
    a = rec.active
    return {"t": "claim", "item": rec.item_id, "last_epoch": format_epoch(rec.last_epoch),
            "active": None if a is None else {"owner_id": a.owner_id, "epoch": format_epoch(a.epoch),
                                              "issued_at": a.issued_at, "expires_at": a.expires_at}}


def _claim_from(ns: str, e: dict) -> ClaimRecord:
    a = e["active"]
    active = None if a is None else Active(a["owner_id"], parse_epoch(a["epoch"]), a["issued_at"], a["expires_at"])
    return ClaimRecord(ns, e["item"], parse_epoch(e["last_epoch"]), active)


def apply(state: JournalState, ns: str, e: dict) -> None:
    """Fold one entry into ``state``."""
    t = e["t"]
    if t == "floor":
        state.floor = e["ms"] if state.floor is None else max(state.floor, e["ms"])
    elif t == "claim":
        state.claims[e["item"]] = _claim_from(ns, e)
    elif t == "publish-intent":
        state.pending[(e["op"], e["item"])] = e
    elif t == "publish-final":
        key = (e["op"], e["item"])
        state.pending.pop(key, None)
        state.finals[key] = e
        state.outcomes[key] = StoredOutcome(e["op"], ns, e["item"], e["digest"], e["exit"], e["envelope"],
                                            e.get("request"))
    elif t == "publish-not-applied":
        key = (e["op"], e["item"])
        state.pending.pop(key, None)
        state.not_applied[key] = e
    elif t == "publish-finalization":
        state.finalized.setdefault((e["op"], e["item"]), e)
    else:
        raise ValueError(f"unknown journal entry kind {t!r}")


#: per process, per (journal path, namespace): the complete lines last folded and the state they fold to.
#: A journal only grows between two replays unless a torn tail is cut or a failed append rolled back (or a
#: power loss undid bytes), so the next replay folds only the lines after them, once its bytes start with
#: exactly them; any other content is folded from the start. Replaying from the start made an op's cost
#: grow with the journal: a 30-s run of 10 workers appends thousands of lines per namespace.
_folded: dict[tuple[str, str], tuple[bytes, int, JournalState]] = {}


def replay(path: str, ns: str) -> JournalState:
    """Read the whole journal and fold it (the lines a replay in this process folded before are not
    parsed again when the journal still starts with them). The state returned is the caller's own."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise StoreUnavailable("journal-not-found", f"no journal at {path}") from None
    end = raw.rfind(b"\n") + 1
    done, lines, state = _folded.get((path, ns), (b"", 0, None))
    if state is None or not raw.startswith(done):   # (done ends in LF: raw starting with it has end >= len(done))
        done, lines, state = b"", 0, JournalState()
    for n, line in enumerate(raw[len(done):end].split(b"\n")[:-1], lines + 1):
        try:
            apply(state, ns, json.loads(line))
        except (ValueError, KeyError, TypeError) as e:
            _folded.pop((path, ns), None)
            raise StoreUnavailable("journal-corrupt", f"{path}:{n}: {e}") from None
        lines = n
    state.size, state.torn = end, end < len(raw)
    _folded[(path, ns)] = (raw if end == len(raw) else raw[:end], lines, state)
    return _own_copy(state)


def _own_copy(s: JournalState) -> JournalState:
    """A copy whose tables the caller may change (a transaction folds its appends into them); the
    entries themselves are never changed in place."""
    return JournalState(s.floor, dict(s.claims), dict(s.outcomes), dict(s.finals), dict(s.pending),
                        dict(s.not_applied), dict(s.finalized), s.size, s.torn)


def repair_torn_tail(path: str, state: JournalState) -> None:
    """Cut a partial last line (caller holds the lock)."""
    if state.torn:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, state.size)
            os.fsync(fd)
        finally:
            os.close(fd)
        state.torn = False


def append(path: str, entries: list[dict]) -> int:
    """Append ``entries`` in one write and fsync; returns the new size. On
    failure, try to truncate back to the old size and raise
    ``JournalWriteFailed`` saying whether that worked."""
    data = b"".join(compact_json(e) + b"\n" for e in entries)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        before = os.fstat(fd).st_size
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError as e:
            try:
                os.ftruncate(fd, before)
                rolled_back = True
            except OSError:
                rolled_back = False
            raise JournalWriteFailed(e, rolled_back) from e
        return before + len(data)
    finally:
        os.close(fd)
