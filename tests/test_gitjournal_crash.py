"""kill -9 of the real CLI during publish-claimed, and two-worktree contention
(reduced counts; ``benchmarks/gitjournal_crash.py`` runs hundreds)."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "gitjournal_crash", Path(__file__).resolve().parents[1] / "benchmarks" / "gitjournal_crash.py")
crash = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash)


@pytest.fixture()
def rig(tmp_path):
    return crash.Rig(str(tmp_path))


@pytest.mark.slow
def test_kill9_during_publish_never_corrupts_or_lies(rig):
    rng = random.Random(7)
    seen = set()
    i = 0
    for order in crash.RECOVERY_ORDERS:               # every exact step once per recovery order ...
        for point in crash.CRASH_POINTS:
            t = crash.trial_at(rig, i, point, order=order)
            assert t["killed"]
            seen.add(t["bytes"])
            i += 1
    for i in range(i, i + 6):                        # ... plus random moments
        t = crash.trial(rig, i, rng)
        seen.add(t["bytes"])
    assert seen == {"old", "new"}  # both sides of the commit were really hit


def test_two_worktrees_never_both_acquire_one_epoch(rig):
    counts = crash.contention(rig, rounds=4)
    assert counts["one-winner"] == 4
