"""The shape of the code, read with `ast` (nothing is imported): the two packages
are independent, neither has an import cycle, library functions stay short,
only CLI modules exit the process, and exported notebook cells stay small.

Run `python tests/test_structure.py` to print the figures."""
from __future__ import annotations

import ast
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("suvi_fill", "szrank")
LONGEST_FUNCTION = 80   # lines, decorators excluded: one screenful
MEDIAN_CELL, LONGEST_CELL = 15, 80   # non-blank lines of an exported notebook cell


def modules(package: str):
    "(dotted name, path) of every module of `package`."
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield name.removesuffix(".__init__"), path


def imported_names(tree: ast.AST):
    "Every absolute module name an `import` or `from ... import` in `tree` names, at any depth."
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def parsed():
    "{module name: syntax tree} of both packages."
    return {name: ast.parse(path.read_text(encoding="utf-8")) for package in PACKAGES
            for name, path in modules(package)}


def import_graph(trees) -> dict[str, set[str]]:
    "Module -> the modules of its own package it imports (a package's `__init__` counts as its own module)."
    def resolve(target):
        while target and target not in trees:
            target = target.rpartition(".")[0]
        return target
    graph = {}
    for name, tree in trees.items():
        own = name.split(".")[0]
        targets = {resolve(t) for t in imported_names(tree) if t.split(".")[0] == own}
        graph[name] = {t for t in targets if t and t != name and t != name.rpartition(".")[0]}
    return graph


def cycles(graph) -> list[list[str]]:
    "The strongly connected components of more than one module (Tarjan's algorithm)."
    index, low, stack, found = {}, {}, [], []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v)
        for w in graph[v]:
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in stack: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]; del stack[stack.index(v):]
            if len(component) > 1: found.append(sorted(component))
    for v in graph:
        if v not in index: visit(v)
    return found


def cross_imports(trees) -> list[str]:
    return [f"{name} -> {t}" for name, tree in trees.items() for t in imported_names(tree)
            if t.split(".")[0] in PACKAGES and t.split(".")[0] != name.split(".")[0]]


def function_lengths(trees) -> list[tuple[int, str]]:
    return sorted(((node.end_lineno - node.lineno + 1, f"{name}:{node.name}") for name, tree in trees.items()
                   for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))),
                  reverse=True)


def system_exits(trees) -> list[str]:
    "`raise SystemExit` outside modules named cli*: library code raises its own errors."
    found = []
    for name, tree in trees.items():
        if name.split(".")[-1].startswith("cli"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id == "SystemExit":
                    found.append(f"{name}:{node.lineno}")
    return found


def exported_cells() -> list[tuple[int, str]]:
    "(non-blank lines, notebook) of every `#| export` cell."
    cells = []
    for notebook in sorted((ROOT / "nbs").rglob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and source.lstrip().startswith("#| export"):
                cells.append((sum(1 for line in source.splitlines() if line.strip()), notebook.name))
    return cells


def figures() -> dict[str, object]:
    trees = parsed()
    lengths, cells = function_lengths(trees), exported_cells()
    return dict(cycles=cycles(import_graph(trees)), cross=cross_imports(trees), longest=lengths[:5],
                system_exit=system_exits(trees), cells=len(cells),
                median_cell=statistics.median(n for n, _ in cells), longest_cells=sorted(cells, reverse=True)[:5])


def test_the_packages_do_not_import_each_other():
    assert cross_imports(parsed()) == []


@pytest.mark.parametrize("package,other", [("suvi_fill", "szrank"), ("szrank", "suvi_fill")])
def test_importing_one_package_loads_nothing_of_the_other(package, other):
    "Checked in a fresh interpreter, every module imported: `sys.modules` holds nothing of the other package."
    code = (f"import importlib, pkgutil, sys, {package}\n"
            f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'): importlib.import_module(m.name)\n"
            f"print(sorted(n for n in sys.modules if n.split('.')[0] == '{other}'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_no_import_cycles():
    assert cycles(import_graph(parsed())) == []


def test_no_library_function_is_longer_than_a_screen():
    assert [f for f in function_lengths(parsed()) if f[0] > LONGEST_FUNCTION] == []


def test_only_the_command_line_exits_the_process():
    assert system_exits(parsed()) == []


def test_exported_notebook_cells_are_small():
    cells = exported_cells()
    assert statistics.median(n for n, _ in cells) <= MEDIAN_CELL
    assert [c for c in cells if c[0] > LONGEST_CELL] == []


def test_the_checker_sees_a_cycle_and_a_long_function():
    "The measurement itself can fail: a two-module cycle and an 81-line function are caught."
    trees = {"p.a": ast.parse("def f():\n    import p.b\n"), "p.b": ast.parse("from p.a import f\n"),
             "p.c": ast.parse("def g():\n" + "    x = 1\n" * 80)}
    assert cycles(import_graph(trees)) == [["p.a", "p.b"]]
    assert function_lengths(trees)[0] == (81, "p.c:g")
    assert system_exits({"p.lib": ast.parse("raise SystemExit(2)")}) == ["p.lib:1"]
    assert system_exits({"p.cli": ast.parse("raise SystemExit(2)")}) == []


if __name__ == "__main__":
    for key, value in figures().items():
        print(f"{key}: {value}")
