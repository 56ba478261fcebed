"""The strict manifest loader (vectors.md §2, §3, §10) and the CLI's handling
of bad input: one line on stderr, exit 254, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.conform.manifest import load_case, load_cases
from chaos.errors import UsageError

VECTORS = Path(__file__).resolve().parents[1] / ".." / "shared" / "vectors" / "work-claims"
ROOT = Path(__file__).resolve().parents[1]


def copy_vectors(dst: Path, cases: list[str] | None = None) -> Path:
    """A writable copy of the vectors (the shared copy is read-only)."""
    dst.mkdir(parents=True, exist_ok=True)
    for sub in ["ledger"] + (cases or [p.name for p in VECTORS.iterdir() if p.is_dir() and p.name != "ledger"]):
        (dst / sub).mkdir()
        for f in (VECTORS / sub).iterdir():
            (dst / sub / f.name).write_bytes(f.read_bytes())
    return dst


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_all_eighteen_load_with_the_published_totals():
    cases = load_cases(VECTORS)
    assert len(cases) == 18
    assert sum(len(c.actions) for c in cases) == 48
    assert len({label for c in cases for label in c.manifest["coverage"]}) == 48
    assert all(len(c.expected["transcript"]) == len(c.actions) for c in cases)


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.replace('"fixture_version": 2,', '"fixture_version": 2,\n  "fixture_version": 2,', 1),
     "duplicate member 'fixture_version'"),
    (lambda t: t.replace('"source_base64": "LS0t', '"source_base64": " LS0t', 1), "not canonical base64"),
    (lambda t: t.replace("sha256:7bd247bb", "sha256:7bd247bc", 1), "digest mismatch"),
    (lambda t: t.rstrip("\n"), "exactly one LF"),
    (lambda t: t + "\n", "exactly one LF"),
    (lambda t: t.replace('"operation_digest": "sha256:45f6', '"operation_digest": "sha256:45f7', 1),
     "operation_digest: digest mismatch"),
    (lambda t: t.replace('"status": "normative-reference-model"', '"status": NaN', 1), "invalid JSON"),
    (lambda t: t.replace('"case": "paused-writer-commit-boundary"', '"case": "other"', 1), "directory name"),
])
def test_malformed_manifest_is_a_one_line_usage_error(tmp_path, edit, problem):
    root = copy_vectors(tmp_path / "v", ["paused-writer-commit-boundary"])
    manifest = root / "paused-writer-commit-boundary" / "manifest.json"
    manifest.write_text(edit(manifest.read_text()))
    with pytest.raises(UsageError) as err:
        load_cases(root)
    message = str(err.value)
    assert "\n" not in message
    assert str(manifest) in message and problem in message


def test_ledger_file_that_differs_from_source_base64_is_rejected(tmp_path):
    root = copy_vectors(tmp_path / "v", ["acquire-contention"])
    (root / "ledger" / "after.md").write_bytes(b"tampered\n")
    with pytest.raises(UsageError, match="does not decode to the bytes of ledger/after.md"):
        load_cases(root)


def test_symlinks_and_special_files_are_refused(tmp_path):
    root = copy_vectors(tmp_path / "v", ["acquire-contention"])
    real = root / "acquire-contention" / "manifest.json"
    os.rename(real, tmp_path / "elsewhere.json")
    os.symlink(tmp_path / "elsewhere.json", real)
    with pytest.raises(UsageError, match="symlinks are not allowed"):
        load_cases(root)
    os.unlink(real)
    os.mkfifo(real)
    with pytest.raises(UsageError, match="not a regular file"):
        load_case(root, "acquire-contention")


def test_unknown_case_and_missing_directory(tmp_path):
    with pytest.raises(UsageError, match="no such case 'nope'"):
        load_cases(VECTORS, ["nope"])
    with pytest.raises(UsageError, match="does not exist"):
        load_cases(tmp_path / "missing")


def test_extra_top_level_member_is_refused(tmp_path):
    root = copy_vectors(tmp_path / "v", ["acquire-contention"])
    manifest = root / "acquire-contention" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["extra"] = 1
    manifest.write_text(json.dumps(doc, indent=2) + "\n")
    with pytest.raises(UsageError, match=r"unexpected \['extra'\]"):
        load_cases(root)


@pytest.mark.parametrize("kind", ["duplicate", "base64", "digest", "missing-dir"])
def test_cli_bad_vectors_exit_254_with_one_line(tmp_path, kind):
    root = copy_vectors(tmp_path / "v", ["paused-writer-commit-boundary"])
    manifest = root / "paused-writer-commit-boundary" / "manifest.json"
    text = manifest.read_text()
    if kind == "duplicate":
        manifest.write_text(text.replace('"case":', '"description": "x",\n  "case":', 1))
    elif kind == "base64":
        manifest.write_text(text.replace('"candidate_source_base64": "LS0t', '"candidate_source_base64": "LS0t=', 1))
    elif kind == "digest":
        manifest.write_text(text.replace("sha256:d8ba5e24", "sha256:d8ba5e25", 1))
    else:
        root = tmp_path / "does-not-exist"
    proc = run_cli("conform", "--backend", "reference", "--vectors", str(root))
    assert proc.returncode == 254, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chaos: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
