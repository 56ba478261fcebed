"""``chaos conform --backend python --factory MOD:FN``: an outside Python
backend over the SQLite store passes or fails the vectors like any backend
(real ``chaos.host`` processes, real barrier / restart / fsync shim)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chaos.testing.mutants_detect import vectors_dir

HAVE_VECTORS = vectors_dir().is_dir()
needs_vectors = pytest.mark.skipif(not HAVE_VECTORS, reason="conformance vectors not found (../shared/vectors/work-claims)")


def conform(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CHAOS_VECTORS=str(vectors_dir()))
    return subprocess.run([sys.executable, "-m", "chaos.cli", "conform", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@needs_vectors
def test_a_mutant_factory_fails_exactly_the_cases_that_name_its_bug():
    p = conform("--backend", "python", "--factory", "chaos.testing.mutants:open_no_fence_epoch", "--json")
    assert p.returncode == 1, p.stderr[-500:]
    report = json.loads(p.stdout)
    failed = sorted(c["case"] for c in report["cases"] if c["status"] == "fail")
    assert failed == ["fence-dimension-rejections", "paused-writer-commit-boundary"]
    assert report["passed"] == 16 and report["failed"] == 2
    assert report["backend"] == "python"


@needs_vectors
def test_the_real_sqlite_backend_as_a_factory_passes_all_18():
    p = conform("--backend", "python", "--factory", "backends.sqlite:open_backend", "--json")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-500:]
    report = json.loads(p.stdout)
    assert report["passed"] == 18 and report["failed"] == 0 and report["not_applicable"] == 0


@pytest.mark.parametrize("args,needle", [
    (("--backend", "python"), "needs --factory"),
    (("--backend", "python", "--factory", "no_such_module_xyz:open"), "cannot load it"),
    (("--backend", "python", "--factory", "backends.sqlite"), "expected MODULE:FUNCTION"),
    (("--backend", "sqlite", "--factory", "backends.sqlite:open_backend"), "only for --backend python"),
])
def test_bad_factory_arguments_are_one_line_usage_errors(args, needle):
    p = conform(*args)
    assert p.returncode == 254 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@needs_vectors
def test_the_guides_file_store_class_passes_every_case_it_can_run():
    """docs/backend-authors.md's Python-class example stores in a JSON file, not
    the SQLite file: the generic adapter seeds and exports through its Store."""
    p = conform("--backend", "python", "--factory", "chaos.testing.filestore:open_backend", "--json")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-500:]
    report = json.loads(p.stdout)
    assert report["failed"] == 0 and report["errors"] == 0 and report["passed"] >= 14
    reasons = {c["case"]: c["notes"][0] for c in report["cases"] if c["status"] == "not-applicable"}
    assert set(reasons) == {"advisory-publication-rejection", "advisory-unfenced", "clock-floor-persistence-failure",
                            "publication-clock-floor-failure"}
    assert all(r.startswith("needs ") for r in reasons.values())
