"""The oracle: all 18 conformance manifests replayed in-process against the
reference backend, transcripts and final state compared type-strictly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.reference import open_backend
from backends.reference.replay import load_manifest, replay, strict_equal

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "work-claims"
CASES = sorted(p.parent.name for p in VECTORS.glob("*/manifest.json"))


def test_all_eighteen_vectors_are_present():
    assert len(CASES) == 18


def _diff(expected, actual, path="") -> str:
    if type(expected) is not type(actual):
        return f"{path}: {expected!r} != {actual!r}"
    if isinstance(expected, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in expected or k not in actual:
                return f"{path}/{k}: present on one side only"
            d = _diff(expected[k], actual[k], f"{path}/{k}")
            if d:
                return d
    elif isinstance(expected, list):
        if len(expected) != len(actual):
            return f"{path}: length {len(expected)} != {len(actual)}"
        for i, (x, y) in enumerate(zip(expected, actual)):
            d = _diff(x, y, f"{path}/{i}")
            if d:
                return d
    elif expected != actual:
        return f"{path}: {expected!r} != {actual!r}"
    return ""


@pytest.mark.parametrize("case", CASES)
def test_vector_replays_exactly(case):
    manifest = load_manifest(VECTORS / case / "manifest.json")
    transcript, final = replay(manifest, open_backend)
    expected = manifest["expected"]
    for i, (want, got) in enumerate(zip(expected["transcript"], transcript)):
        assert strict_equal(want, got), f"action {i}: {_diff(want, got)}"
    assert len(transcript) == len(expected["transcript"])
    assert strict_equal(expected["final"], final), _diff(expected["final"], final)


def test_strict_equal_is_type_strict():
    assert not strict_equal({"a": True}, {"a": 1})
    assert not strict_equal([1], [1.0])
    assert strict_equal({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})


def _replays_exactly(case) -> bool:
    manifest = load_manifest(VECTORS / case / "manifest.json")
    transcript, final = replay(manifest, open_backend)
    return strict_equal(manifest["expected"]["transcript"], transcript) and \
        strict_equal(manifest["expected"]["final"], final)


def test_replay_detects_a_read_that_persists_the_floor(monkeypatch):
    from backends.engine import Engine
    original = Engine._read

    def persisting_read(self, op, req):
        with self.store.transaction(write=True) as txn:
            self._persist_floor(txn, req.ledger_namespace)
        return original(self, op, req)

    monkeypatch.setattr(Engine, "_read", persisting_read)
    assert not _replays_exactly("claim-response-loss-read")


def test_replay_detects_unstored_fence_rejections(monkeypatch):
    from backends.reference.memory_store import MemoryTxn
    original = MemoryTxn.put_outcome

    def only_successes(self, outcome):
        if outcome.exit == 0:
            original(self, outcome)

    monkeypatch.setattr(MemoryTxn, "put_outcome", only_successes)
    assert not _replays_exactly("fence-dimension-rejections")


def test_replay_detects_a_floor_checked_after_the_decision(monkeypatch):
    from backends.engine import Engine
    monkeypatch.setattr(Engine, "_effective", lambda self, txn, ns: self.clock.now_ms())
    assert not _replays_exactly("backward-clock-rejection-restart")


def test_load_manifest_refuses_symlinks_inside_the_vectors_folder(tmp_path):
    case = tmp_path / "vectors" / "case"
    case.mkdir(parents=True)
    real = case / "real.json"
    real.write_bytes(b"{}\n")
    link = case / "link.json"
    link.symlink_to(real)
    assert load_manifest(real) == {}
    with pytest.raises((ValueError, OSError)):
        load_manifest(link)
    (tmp_path / "vectors" / "linked-case").symlink_to(case)
    with pytest.raises(ValueError, match="symlink"):
        load_manifest(tmp_path / "vectors" / "linked-case" / "real.json")
    (case / "two.json").write_bytes(b"{}\n\n")
    with pytest.raises(ValueError):
        load_manifest(case / "two.json")


def test_load_manifest_follows_a_symlink_above_the_vectors_folder(tmp_path):
    """A ``../shared`` that is itself a symlink is the user's layout, not the fixture's."""
    case = tmp_path / "real-shared" / "vectors" / "case"
    case.mkdir(parents=True)
    (case / "manifest.json").write_bytes(b'{"a": 1}\n')
    (tmp_path / "shared").symlink_to(tmp_path / "real-shared")
    assert load_manifest(tmp_path / "shared" / "vectors" / "case" / "manifest.json") == {"a": 1}


def test_load_manifest_refuses_a_fifo_without_blocking(tmp_path):
    case = tmp_path / "vectors" / "case"
    case.mkdir(parents=True)
    os.mkfifo(case / "manifest.json")
    with pytest.raises(ValueError, match="regular"):
        load_manifest(case / "manifest.json")
