"""The layout's rules, checked on the import graph of mirage_jax/ (built with `ast`, nothing
is imported): which folder may import which (docs/architecture.md), no circles between
modules, and no imports inside functions except of the optional dependencies listed here.

Imports under `if TYPE_CHECKING:` are annotations only and are not edges. Importing a module
also runs its parent packages' __init__; those implicit edges are not counted either (a
package's __init__ re-exports its own modules, so every module would "import" them)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mirage_jax"

# folder -> the folders (and top-level modules) of mirage_jax it must not import.
FORBIDDEN = {
    "ir": ("frontend", "superopt", "runtime", "cache", "rewrite", "cli"),
    "frontend": ("superopt", "runtime", "cache", "rewrite", "cli"),
    "runtime": ("superopt", "rewrite", "cli", "frontend"),
    "cache": ("ir", "frontend", "superopt", "runtime", "rewrite", "cli", "_core"),
    "superopt": ("rewrite", "cli", "frontend"),
    "rewrite": ("cli",),
}

# Modules that may be imported inside a function, and why: optional dependencies only.
LAZY_ALLOWED: dict[str, str] = {}


@dataclass
class ImportGraph:
    edges: dict[str, set[str]] = field(default_factory=dict)  # module -> modules it imports
    # (module, line, imported module) of each import inside a function or class body
    lazy: list[tuple[str, int, str]] = field(default_factory=list)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]
) -> list[str]:
    """The mirage_jax modules `node` imports (a `from package import module` names the
    module; a `from module import name`, the module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = module.split(".")
            if not is_package:
                anchor = anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        names = []
        for alias in node.names:
            full = f"{base}.{alias.name}"
            names.append(full if full in modules else base)
    root = next(iter(modules)).split(".")[0]
    return [n for n in names if n == root or n.startswith(root + ".")]


@dataclass
class _Module:
    """The module being read: its name, whether it is a package's __init__, its edges."""

    name: str
    is_package: bool
    edges: set[str]


def _visit(
    node: ast.AST, in_function: bool, module: _Module, modules: set[str], graph: ImportGraph
) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for sub in child.orelse:
                _visit(sub, in_function, module, modules, graph)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            targets = _imported(child, module.name, module.is_package, modules)
            if in_function:
                names = (
                    [a.name for a in child.names]
                    if isinstance(child, ast.Import)
                    else [child.module or "."]
                )
                graph.lazy += [(module.name, child.lineno, n) for n in names]
            module.edges.update(t for t in targets if t != module.name)
            continue
        inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
        _visit(child, in_function or inner, module, modules, graph)


def build(root: Path) -> ImportGraph:
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files) | {f"{root.name}._core"}
    graph = ImportGraph()
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        module = _Module(name, path.name == "__init__.py", graph.edges.setdefault(name, set()))
        _visit(tree, False, module, modules, graph)
    return graph


def folder_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def forbidden_imports(graph: ImportGraph) -> list[str]:
    problems = []
    for module, targets in sorted(graph.edges.items()):
        banned = FORBIDDEN.get(folder_of(module), ())
        for target in sorted(targets):
            if folder_of(target) in banned:
                problems.append(
                    f"{module} imports {target} ({folder_of(module)}/ must not "
                    f"import {folder_of(target)})"
                )
    return problems


def cycles(graph: ImportGraph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.edges.get(v, ())):
            if w not in index:
                strongconnect(w)
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

    for v in sorted(graph.edges):
        if v not in index:
            strongconnect(v)
    return found


def lazy_imports(graph: ImportGraph) -> list[str]:
    return [
        f"{module}:{line} imports {name} inside a function"
        for module, line, name in graph.lazy
        if name.split(".")[0] not in LAZY_ALLOWED and name not in LAZY_ALLOWED
    ]


# -- the rules on mirage_jax ---------------------------------------------------------------


@pytest.fixture(scope="module")
def package() -> ImportGraph:
    return build(PACKAGE)


def test_each_folder_imports_only_what_it_may(package):
    assert forbidden_imports(package) == []


def test_no_circles_between_modules(package):
    assert cycles(package) == []


def test_no_imports_inside_functions_except_optional_dependencies(package):
    assert lazy_imports(package) == []


def test_the_graph_sees_the_package(package):
    """A checker that found no modules or no edges would pass every rule."""
    assert "mirage_jax.frontend.partition" in package.edges
    assert "mirage_jax.ir.graph" in package.edges["mirage_jax.frontend.to_graph"]
    assert "mirage_jax.superopt.search" in package.edges["mirage_jax.superopt.superoptimize"]


# -- the checker catches each kind of violation --------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_checker_reports_a_forbidden_import(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "frontend/__init__.py": "",
            "frontend/a.py": "from pkg.superopt import b\n",
            "superopt/__init__.py": "",
            "superopt/b.py": "",
            "cache/__init__.py": "",
            "cache/c.py": "from pkg.ir.graph import KernelGraph\n",
            "ir/__init__.py": "",
            "ir/graph.py": "KernelGraph = 1\n",
        },
    )
    problems = forbidden_imports(build(pkg))
    assert problems == [
        "pkg.cache.c imports pkg.ir.graph (cache/ must not import ir)",
        "pkg.frontend.a imports pkg.superopt.b (frontend/ must not import superopt)",
    ]


def test_the_checker_reports_a_circle(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "import pkg.c\n",
            "c.py": "from . import a\n",
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n",
        },
    )
    assert cycles(build(pkg)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_checker_reports_an_import_inside_a_function(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import json\n\ndef f():\n    import numpy\n    return numpy\n",
        },
    )
    assert lazy_imports(build(pkg)) == ["pkg.a:4 imports numpy inside a function"]
