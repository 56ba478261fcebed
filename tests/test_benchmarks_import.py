"""Every benchmark script imports cleanly (the benchmarks are not run by the
suite, so a renamed helper would otherwise only break them at release time)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_benchmark_imports(path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)  # the scripts run only under __main__
    finally:
        sys.modules.pop(spec.name, None)
    assert callable(getattr(module, "main", None))
