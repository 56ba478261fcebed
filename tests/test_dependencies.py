"""Every runtime dependency pyproject.toml declares is imported (or located with
``find_spec``) by the suite's own packages (issue 13: ``ruamel.yaml`` was
declared and never imported)."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("backends", "workloads", "checkers", "chaos")


def _imported_top_names() -> set[str]:
    names = set()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "find_spec" and node.args
                      and isinstance(node.args[0], ast.Constant)):   # located, not imported (a preloaded .so)
                    names.add(str(node.args[0].value).split(".")[0])
    return names


def _normal(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def test_every_declared_dependency_is_imported():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = {_normal(re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0]) for d in declared}
    imported = {_normal(dist) for name in _imported_top_names() for dist in packages_distributions().get(name, [])}
    assert wanted - imported == set(), "declared in pyproject.toml but never imported"
