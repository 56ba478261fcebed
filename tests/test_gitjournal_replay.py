"""The Git-journal's replay folds only the lines it has not folded before, and only while the journal
still starts with the lines it folded: whatever happened to the file in between (an append by another
process, a torn tail cut, a failed append rolled back and other bytes appended, a line corrupted in
the part already folded), each replay equals a replay from scratch. Real files, real appends with
fsync through the journal's own functions."""

from __future__ import annotations

import os

import pytest

from backends.api import StoreUnavailable
from backends.gitjournal import journal as jr

NS = "ns"


def _claim(item: str, epoch: int) -> dict:
    return {"t": "claim", "item": item, "last_epoch": str(epoch),
            "active": {"owner_id": f"o{epoch}", "epoch": str(epoch), "issued_at": epoch, "expires_at": epoch + 10}}


def _fresh(path: str) -> jr.JournalState:
    """The replay of a process that never folded this journal."""
    saved = dict(jr._folded)
    jr._folded.clear()
    try:
        return jr.replay(path, NS)
    finally:
        jr._folded.clear()
        jr._folded.update(saved)


@pytest.fixture()
def journal(tmp_path):
    jr._folded.clear()
    path = jr.init_journal(str(tmp_path / "ns"))
    yield path
    jr._folded.clear()


def test_each_replay_equals_one_from_scratch_whatever_the_file_went_through(journal):
    jr.append(journal, [{"t": "floor", "ms": 5}, _claim("a", 1)])
    assert jr.replay(journal, NS) == _fresh(journal)
    # appended since (by any process): only the new lines are folded, the result is the whole journal's
    jr.append(journal, [{"t": "floor", "ms": 9}, _claim("a", 2), _claim("b", 1)])
    state = jr.replay(journal, NS)
    assert state == _fresh(journal) and state.floor == 9 and state.claims["a"].last_epoch == 2
    # a torn tail: not folded, then cut and replaced by other lines
    with open(journal, "ab") as f:
        f.write(b'{"t": "floor", "ms": 99')
    state = jr.replay(journal, NS)
    assert state.torn and state.floor == 9 and state == _fresh(journal)
    jr.repair_torn_tail(journal, state)
    jr.append(journal, [{"t": "floor", "ms": 12}])
    assert jr.replay(journal, NS) == _fresh(journal) and jr.replay(journal, NS).floor == 12
    # complete lines folded, then rolled back (as a failed append does) and other bytes written
    size = os.path.getsize(journal)
    jr.append(journal, [_claim("c", 7)])
    assert "c" in jr.replay(journal, NS).claims
    os.truncate(journal, size)
    jr.append(journal, [_claim("d", 3)])
    state = jr.replay(journal, NS)
    assert "c" not in state.claims and "d" in state.claims and state == _fresh(journal)


def test_a_change_inside_the_folded_lines_is_read_from_scratch_and_corruption_is_still_found(journal):
    jr.append(journal, [{"t": "floor", "ms": 5}, _claim("a", 1)])
    jr.replay(journal, NS)
    raw = open(journal, "rb").read()
    with open(journal, "wb") as f:
        f.write(raw.replace(b'"ms":5', b'"ms":6'))   # same length: a size check alone would not see it
    assert jr.replay(journal, NS).floor == 6
    with open(journal, "r+b") as f:
        f.write(b"X")
    with pytest.raises(StoreUnavailable, match=r":1: "):
        jr.replay(journal, NS)


def test_the_state_a_replay_returns_is_the_callers_own(journal):
    """A transaction folds its own appends into the state it got; the next replay must not see them
    unless they are in the file."""
    jr.append(journal, [_claim("a", 1)])
    mine = jr.replay(journal, NS)
    jr.apply(mine, NS, _claim("z", 4))
    mine.floor = 1234
    again = jr.replay(journal, NS)
    assert "z" not in again.claims and again.floor is None and again == _fresh(journal)
