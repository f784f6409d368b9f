"""The floor plan holds: the core never imports a frontend, packages import each other without
cycles, every op family is one registered folder, and source files stay small.

Imports are read from the source (every `import` statement, function-level ones included), not
from `sys.modules`, so a lazy import inside a function counts like any other.
"""

from __future__ import annotations

import ast
import functools
import os
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("shared_codegen", "tile", "gluon")
MAX_LINES = 800  # "files under ~800 lines" (STYLE.md)


def _modules() -> Dict[str, str]:
    """Dotted module name -> file path, for every module of our packages."""
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


@functools.lru_cache(maxsize=None)
def _imports(path: str) -> List[tuple]:
    """(line, imported module) for every import in the file, resolved to our longest known
    module (`from a.b import c` imports `a.b.c` when that is a module, else `a.b`)."""
    tree = ast.parse(open(path).read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in PACKAGES:
                continue
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                out.append((node.lineno, name))
    return out


def _unit(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def _package_graph(depth: int) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for module, path in MODULES.items():
        for _, imported in _imports(path):
            a, b = _unit(module, depth), _unit(imported, depth)
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                graph.setdefault(a, set()).add(b)
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_core_imports_no_frontend():
    offending = [f"{os.path.relpath(path, ROOT)}:{line} imports {imported}"
                 for module, path in MODULES.items() if module.startswith("shared_codegen")
                 for line, imported in _imports(path)
                 if imported.split(".")[0] in ("tile", "gluon")]
    assert offending == []


def test_tile_does_not_import_gluon():
    offending = [f"{os.path.relpath(path, ROOT)}:{line} imports {imported}"
                 for module, path in MODULES.items() if module.startswith("tile")
                 for line, imported in _imports(path) if imported.startswith("gluon")]
    assert offending == []


@pytest.mark.parametrize("depth", [1, 2], ids=["packages", "subpackages"])
def test_packages_import_each_other_without_cycles(depth):
    assert _cycles(_package_graph(depth)) == []


def test_every_op_family_is_one_registered_folder():
    from shared_codegen import ops

    folder = os.path.join(ROOT, "shared_codegen", "ops")
    on_disk = sorted(name for name in os.listdir(folder)
                     if os.path.isdir(os.path.join(folder, name)) and not name.startswith("__"))
    assert sorted(ops.FAMILIES) == on_disk
    for family in on_disk:
        assert os.path.exists(os.path.join(folder, family, "definition.py")), family


def test_every_registered_op_is_defined_in_an_op_family():
    from shared_codegen.ir.core import all_opdefs

    # Tests may define ops of their own; the packages may define them only in op families.
    outside = sorted(name for name, opdef in all_opdefs().items()
                     if type(opdef).__module__.split(".")[0] in PACKAGES
                     and not type(opdef).__module__.startswith("shared_codegen.ops."))
    assert outside == []


def test_source_files_stay_small():
    large = sorted(f"{os.path.relpath(path, ROOT)}: {n} lines" for path in MODULES.values()
                   if (n := sum(1 for _ in open(path))) > MAX_LINES)
    assert large == []
