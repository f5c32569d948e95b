"""The project's module graph has no cycles (DESIGN.md: dependencies point one way).

Every ``import`` and ``from ... import`` of the project's own modules counts, wherever it appears:
inside functions, under ``if TYPE_CHECKING:``, relative or absolute. A lazy import hides a cycle from
Python's import machinery; it does not remove it from the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("planner", "costmodel", "search", "profiles")


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages and ``cli.py``."""
    modules = {"cli": root / "cli.py"} if (root / "cli.py").exists() else {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import statement names (for ``from m import x``: ``m`` and ``m.x``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(root: Path) -> nx.DiGraph:
    """Module -> module it imports, among the project's own modules."""
    modules = project_modules(root)
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _imported(node, package):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Each set of modules that import each other, directly or not (strongly connected components)."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_the_project_has_no_import_cycles() -> None:
    graph = import_graph(ROOT)
    assert graph.number_of_nodes() > 100  # the walk found the project
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_lazy_import_that_closes_a_cycle_is_found(tmp_path: Path) -> None:
    (tmp_path / "planner" / "plans").mkdir(parents=True)
    (tmp_path / "planner" / "__init__.py").write_text("")
    (tmp_path / "planner" / "plans" / "__init__.py").write_text("")
    (tmp_path / "planner" / "plans" / "schema.py").write_text("def to_report():\n    from planner.report import render\n")
    (tmp_path / "planner" / "report.py").write_text("from .plans.schema import to_report\n\ndef render():\n    pass\n")
    assert cycles(import_graph(tmp_path)) == [["planner.plans.schema", "planner.report"]]


def test_costmodel_and_search_never_import_the_planner() -> None:
    graph = import_graph(ROOT)
    upward = [(a, b) for a, b in graph.edges if a.startswith(("costmodel", "search", "profiles")) and b.startswith(("planner", "cli"))]
    upward += [(a, b) for a, b in graph.edges if a.startswith("costmodel") and b.startswith(("search", "profiles"))]
    assert not upward, f"imports against the design's direction: {upward}"


FORBIDDEN_FOLDER_EDGES = (("planner.plans", "planner.outputs"), ("planner.estimation", "planner.plans"))
"""Folder pairs (lower, upper) of ``planner/``'s pipeline where the lower one must not import the upper
(issue 33): the plan is checked and built without the report and export room, and an estimate is
priced without the plan room (the atomic writes, engine rules, configuration checks and heterogeneous
pricing both need sit below them)."""


def upward_folder_edges(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Each import from a module of a lower folder to one of its forbidden upper folder."""
    def inside(module: str, folder: str) -> bool:
        return module == folder or module.startswith(folder + ".")

    return sorted((a, b) for a, b in graph.edges for low, high in FORBIDDEN_FOLDER_EDGES if inside(a, low) and inside(b, high))


def test_no_planner_folder_imports_one_drawn_above_it() -> None:
    found = upward_folder_edges(import_graph(ROOT))
    assert not found, f"imports from a lower planner folder into a higher one: {found}"


def test_an_upward_folder_import_is_found(tmp_path: Path) -> None:
    for folder in ("planner", "planner/plans", "planner/outputs"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "planner" / "outputs" / "atomic.py").write_text("def write_atomic():\n    pass\n")
    (tmp_path / "planner" / "plans" / "given.py").write_text("def save():\n    from planner.outputs.atomic import write_atomic\n")
    assert upward_folder_edges(import_graph(tmp_path)) == [("planner.plans.given", "planner.outputs.atomic")]
