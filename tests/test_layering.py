"""Imports point one way (design.md): chaos -> workloads, checkers -> backends.
``backends`` imports nothing of the others; ``checkers`` and ``workloads``
never import ``chaos``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "backends": {"chaos", "workloads", "checkers"},
    "checkers": {"chaos", "workloads"},
    "workloads": {"chaos"},
}


def _imported_top_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_top_packages(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert offenders == []
