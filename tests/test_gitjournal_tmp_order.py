"""gitjournal handles the temp files it finds (its lock's, its writers') in an order their writers' pids
play no part in: a directory lists in its file system's hash order of the whole name, and the names hold
real pids, so two deterministic runs of one seed visited a live writer's lock temp file before or after a
dead one's, and their schedules parted (a trace that differed in one clock, one run in four)."""

from __future__ import annotations

import os

from backends.gitjournal import fsio, lock


def _visits(monkeypatch, tmp_path, listing: list[str]) -> tuple[list[int], list[str]]:
    """The pids the lock's recovery looked at and the temp files removal unlinked, for ``listing``."""
    looked, unlinked = [], []
    monkeypatch.setattr(os, "listdir", lambda d: list(listing))
    monkeypatch.setattr(lock, "process_stat", lambda pid: looked.append(pid))
    monkeypatch.setattr(fsio, "_unlink_quietly", lambda path: unlinked.append(os.path.basename(path)))
    lock.NamespaceLock(str(tmp_path))._remove_dead_tmp()
    fsio.remove_stale_tmp(str(tmp_path))
    return looked, unlinked


def test_temp_files_are_visited_by_their_tokens_whatever_their_pids_and_listing(monkeypatch, tmp_path):
    # one run's pids, listed in one order; another run's pids for the same writers, listed in another
    one = ["lock.tmp.31007.b2", "journal.jsonl", ".wb-tmp-item.31007.f1", "lock.tmp.4100.a1", ".wb-tmp-item.4100.c9"]
    other = [".wb-tmp-item.9020.c9", "lock.tmp.9020.a1", "recover.lock", "lock.tmp.28761.b2", ".wb-tmp-item.28761.f1"]
    looked_one, unlinked_one = _visits(monkeypatch, tmp_path, one)
    looked_other, unlinked_other = _visits(monkeypatch, tmp_path, other)
    assert looked_one == [4100, 31007] and looked_other == [9020, 28761]   # the writer of token a1 first
    assert unlinked_one == [".wb-tmp-item.4100.c9", ".wb-tmp-item.31007.f1"]
    assert unlinked_other == [".wb-tmp-item.9020.c9", ".wb-tmp-item.28761.f1"]
