"""A backend that keeps its state in process memory is named as such, in one
line, before any conformance case runs (issue #30, item 6)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chaos.conform import process_model
from chaos.conform.suite import run_conformance
from chaos.errors import UsageError

MEMORY = "tests.memory_dict_backend:open_backend"


def test_a_dict_in_process_memory_is_named_and_a_file_store_is_not():
    line = process_model.check(MEMORY)
    assert line is not None and "\n" not in line
    assert line.startswith(f"--factory {MEMORY} keeps its state in process memory")
    assert "spec['path']" in line
    assert process_model.check("chaos.testing.filestore:open_backend") is None


def test_conform_reports_the_process_model_instead_of_pages_of_diffs():
    from chaos.commands.conform import default_vectors

    try:
        vectors = default_vectors()
    except UsageError as e:
        pytest.skip(str(e))
    report = run_conformance("python", vectors, ["acquire-contention"], {"factory": MEMORY})
    assert [(r.case, r.status) for r in report.results] == [("process-model", "fail")]
    assert report.results[0].diff[0].startswith(f"--factory {MEMORY} keeps its state in process memory")
    assert report.exit_code == 1


def test_the_probe_of_a_run_scratches_under_its_store_and_leaves_nothing(tmp_path, monkeypatch):
    """`chaos run` passes its store: the system temp dir is not written (here it does not exist)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temp-dir"))
    store = tmp_path / "store"
    store.mkdir()
    assert process_model.check(MEMORY, str(store)) is not None
    assert list(store.iterdir()) == []


def test_a_probe_removes_the_scratch_a_killed_run_left_in_the_store(tmp_path):
    """A harness SIGKILLed during its probe never ran its cleanup: its scratch dir names its pid, and the
    next probe in that store removes it (a live process's is left alone)."""
    import os

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = tmp_path / "store"
    left = store / f".chaos-process-model-{dead.pid}-abcd1234"
    (left / "state").mkdir(parents=True)
    (left / "state" / "claims.db").write_bytes(b"x")
    alive = store / f".chaos-process-model-{os.getppid()}-efgh5678"
    alive.mkdir()
    assert process_model.check(MEMORY, str(store)) is not None
    assert sorted(p.name for p in store.iterdir()) == [alive.name]
