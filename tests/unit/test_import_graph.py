"""The package's import graph as its own source draws it: every import statement,
including the deferred ones inside functions and those under ``TYPE_CHECKING``.

Two rules that import-linter's contracts cannot state: no module reaches itself
through its imports (a cycle), and no module imports another's private name (``_x``).
The helper (``gputui.remote``) is shipped alone and checked in test_import_hygiene.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parents[2] / "gputui"

Graph = dict[str, set[str]]


def modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def edges(
    found: dict[str, tuple[Path, bool]],
) -> tuple[Graph, list[tuple[str, str, str]]]:
    """The graph (module -> the package modules it imports) and every private name
    imported across modules as (importer, imported, name)."""
    graph: Graph = {name: set() for name in found}
    private: list[tuple[str, str, str]] = []
    for name, (path, is_package) in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                target = _target(name, is_package, node)
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    imported = full if full in found else target
                    if imported not in found or imported == name:
                        continue
                    graph[name].add(imported)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((name, imported, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imported = alias.name
                    while imported and imported not in found:
                        imported = imported.rpartition(".")[0]
                    if imported and imported != name:
                        graph[name].add(imported)
    return graph, private


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_no_module_reaches_itself_through_its_imports() -> None:
    graph, _ = edges(modules())
    graph = {k: v for k, v in graph.items() if not k.startswith("gputui.remote")}
    assert cycles(graph) == []


def test_no_private_name_is_imported_across_modules() -> None:
    _, private = edges(modules())
    gettext = {("gputui.common.i18n", "_"), ("gputui.common.i18n", "N_")}  # the convention
    assert [
        p for p in private if not p[0].startswith("gputui.remote") and (p[1], p[2]) not in gettext
    ] == []


def test_the_graph_is_drawn_from_deferred_and_type_only_imports_too(tmp_path: Path) -> None:
    """The check itself: a cycle made only of a function-level import and a
    ``TYPE_CHECKING`` one is still a cycle, and a private name is still seen."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import _x\n    return _x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n_x = 1\n"
    )
    graph, private = edges(modules(pkg))
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert private == [("pkg.a", "pkg.b", "_x")]


@given(st.dictionaries(st.integers(0, 12), st.sets(st.integers(0, 12), max_size=4), max_size=13))
def test_cycles_are_exactly_the_parts_where_each_module_reaches_the_others(
    raw: dict[int, set[int]],
) -> None:
    graph: Graph = {str(k): {str(v) for v in vs} for k, vs in raw.items()}
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    expected = {
        frozenset(m for m in graph if m == n or (m in reach(n) and n in reach(m))) for n in graph
    }
    expected = {part for part in expected if len(part) > 1}
    assert {frozenset(part) for part in cycles(graph)} == expected
