"""The house's structure, read from the code's own imports (issue 32).

* No import cycle anywhere in ``backends/``, ``checkers/``, ``workloads/``,
  ``chaos/``: every import counts, also one made inside a function (a local
  import that only hides a cycle is still a cycle) and one by
  ``importlib.import_module`` of a literal module name.
* ``backends/contract`` is the bottom of the house: its modules import only
  each other and the standard library (plus PyYAML, whose event stream the
  ledger item's YAML reader is written over).

An import names the most precise module it can: ``from a.b import c`` is an
edge to ``a.b.c`` where that is a module, else to ``a.b``. The parent
packages a dotted import also runs are not edges: a package's ``__init__``
that hands its children's names on would otherwise be a cycle with each child.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("backends", "checkers", "workloads", "chaos")
CONTRACT = "backends.contract"
#: Outside the standard library, what the contract may import, and why.
CONTRACT_MAY_IMPORT = {"yaml"}  # ledger_yaml reads PyYAML's event stream (YAML 1.2 core semantics)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = ROOT) -> dict[str, Path | None]:
    """Every module of the house: its Python files, and the extensions setup.py compiles (they import
    nothing of the house, but ``from . import _search`` names a module, not its package)."""
    modules = {_module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}
    setup = root / "setup.py"
    for node in ast.walk(ast.parse(setup.read_text()) if setup.exists() else ast.Module(body=[], type_ignores=[])):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension"
                and node.args and isinstance(node.args[0], ast.Constant)):
            modules[node.args[0].value] = None   # compiled C: it imports nothing of the house
    return modules


def _imported_names(module: str, path: Path, modules: dict[str, Path | None]) -> list[str]:
    """Every dotted name ``module`` imports, at any depth of its code: ``from a.b import c`` names
    ``a.b.c`` where that is a module of the house, else ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names += [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args:
            names += _dynamically_imported(module, node.args[0], modules)
    return names


def _dynamically_imported(module: str, arg: ast.expr, modules: dict[str, Path | None]) -> list[str]:
    """``import_module("a.b")`` names a.b; ``import_module(f"a.{x}")`` or ``f"{__name__}.{x}"`` may name
    any child of ``a`` (or of this module), so it names them all."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if not isinstance(arg, ast.JoinedStr):
        return []
    prefix = ""
    for part in arg.values:
        if isinstance(part, ast.Constant):
            prefix += str(part.value)
        elif isinstance(part.value, ast.Name) and part.value.id == "__name__":
            prefix += module
        else:
            break
    package = prefix.rpartition(".")[0] if "." in prefix else ""
    return [m for m in modules if package and m.startswith(prefix) and m.rpartition(".")[0] == package]


def _edges(modules: dict[str, Path | None]) -> dict[str, set[str]]:
    """module -> the modules of the house it imports."""
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for name in _imported_names(module, path, modules) if path else ():
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        edges[module] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _contract_offenders(modules: dict[str, Path | None]) -> list[str]:
    offenders = []
    for module, path in modules.items():
        if path is None or (module != CONTRACT and not module.startswith(CONTRACT + ".")):
            continue
        for name in _imported_names(module, path, modules):
            top = name.split(".")[0]
            inside = name == CONTRACT or name.startswith(CONTRACT + ".")
            if name and not (inside or top == "__future__" or top in sys.stdlib_module_names
                             or top in CONTRACT_MAY_IMPORT):
                offenders.append(f"{module} imports {name}")
    return offenders


def _described(edges: dict[str, set[str]]) -> list[str]:
    return [" <-> ".join(c) + "  [" + "; ".join(f"{a} -> {b}" for a in c for b in sorted(edges[a] & set(c))) + "]"
            for c in _cycles(edges)]


def test_no_import_cycle():
    assert _described(_edges(_modules())) == []


def test_the_contract_imports_only_itself_and_the_standard_library():
    assert _contract_offenders(_modules()) == []


def test_the_walk_sees_a_cycle_hidden_in_a_function_and_a_contract_importing_storage(tmp_path):
    """The checks above could pass by reading too little: a toy house shows they see a lazy import,
    an import by ``importlib`` of an f-string, and a contract module importing the storage protocols."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "backends" / "contract").mkdir()
    (tmp_path / "backends" / "contract" / "__init__.py").write_text("")
    (tmp_path / "backends" / "a.py").write_text("from backends.b import f\n")
    (tmp_path / "backends" / "b.py").write_text("def f():\n    from backends import a\n    return a\n")
    (tmp_path / "chaos" / "kinds.py").write_text("import importlib\n\ndef get(n):\n"
                                                 "    return importlib.import_module(f'chaos.{n}')\n")
    (tmp_path / "chaos" / "one.py").write_text("from chaos.kinds import get\n")
    (tmp_path / "backends" / "contract" / "values.py").write_text("import re\nfrom backends.b import f\n")
    modules = _modules(tmp_path)
    assert _cycles(_edges(modules)) == [["backends.a", "backends.b"], ["chaos.kinds", "chaos.one"]]
    assert _contract_offenders(modules) == ["backends.contract.values imports backends.b"]
