"""Every file meshplan reads passes the gate (``profiles.jsonio``, re-exported by ``planner.intake.jsonio``).

The test walks the project's packages and ``cli.py`` (ast) for every call that opens or reads a file
(``open``, ``io.open``, ``os.open``, ``os.fdopen``, ``Path.open``, ``.read_text``, ``.read_bytes``)
or parses JSON (``json.load`` / ``json.loads``: the gate's depth check must come before Python's
recursive parser). Each must be in the gate or in :data:`ALLOWED`, which says why that call never
reads a user's path; an entry that no longer matches a call fails too, so the list stays exact.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("planner", "profiles", "costmodel", "search")
GATE = "profiles/jsonio.py"
OPENERS = {"open", "fdopen", "read_text", "read_bytes", "load", "loads"}
"""Names of the calls that read a file or parse JSON (``x.load`` also covers ``torch.load`` and ``pickle.load``)."""

ALLOWED: dict[tuple[str, str, str], str] = {
    ("planner/intake/jsonio.py", "read_bytes", "_gate.read_bytes"): "the planner's re-export of the gate",
    ("planner/intake/jsonio.py", "read_text", "_gate.read_text"): "the planner's re-export of the gate",
    ("planner/cli/__init__.py", "report", "os.open"): "opens os.devnull for writing (stdout closed by a broken pipe)",
    ("planner/cli/run.py", "_rank", "os.open"): "opens os.devnull for writing (a worker's stderr after Ctrl-C)",
    ("planner/cli/run.py", "_on_group", "os.open"): "opens os.devnull for writing (a worker's stderr after Ctrl-C)",
    ("planner/cli/run.py", "_oom_marked", "open"): "creates the launcher's empty out-of-memory marker file (a write)",
    ("planner/atomic.py", "write_atomic", "os.fdopen"): "writes the temporary file of an atomic write",
    ("planner/capacity/assemble.py", "_step_time", "json.loads"): "parses plan JSON meshplan itself produced in memory",
    ("planner/runtime/memcheck/cases.py", "config_path", "path.read_text"):
        "compares a config.json meshplan writes into its own temporary folder with what it would write",
    ("planner/runtime/profile/hardware.py", "_cpuinfo", "path.read_text"): "reads /proc/cpuinfo, a kernel file",
    ("planner/runtime/profile/links.py", "_rss_gib", "open"): "reads /proc/self/statm, a kernel file",
    ("planner/runtime/run.py", "_cpu_name", "open"): "reads /proc/cpuinfo, a kernel file",
    ("planner/reference/serving_runs.py", "read_rows", "resources.files(__package__).joinpath(CSV_FILE).read_text"):
        "package data shipped inside the wheel (importlib.resources), not a user's file",
    ("profiles/loader.py", "_packaged_text", "resources.files(__package__).joinpath(filename).read_text"):
        "package data shipped inside the wheel (importlib.resources), not a user's file",
    ("profiles/loader.py", "_packaged_section", "json.loads"): "parses the packaged gpus.json / clusters.json text",
    ("profiles/serving.py", "_file", "resources.files(__package__).joinpath(SERVING_FILE).read_text"):
        "package data shipped inside the wheel (importlib.resources), not a user's file",
    ("profiles/serving.py", "_file", "json.loads"): "parses the packaged serving.json text",
}
"""(file, enclosing function, call) -> why it does not read a user's path."""


def readers(root: Path) -> set[tuple[str, str, str]]:
    """(file, enclosing function, call text) of every file-reading or JSON-parsing call outside the gate."""
    files = [root / "cli.py"] if (root / "cli.py").exists() else []
    files += [path for package in PACKAGES if (root / package).is_dir() for path in sorted((root / package).rglob("*.py"))]
    found = set()
    for path in files:
        rel = path.relative_to(root).as_posix()
        if rel != GATE:
            found |= {(rel, where, call) for where, call in _calls(ast.parse(path.read_text(encoding="utf-8")))}
    return found


def _calls(tree: ast.AST) -> list[tuple[str, str]]:
    """(innermost enclosing function or ``<module>``, call text) of the reading calls in ``tree``."""
    out: list[tuple[str, str]] = []

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, child.name)
                continue
            if isinstance(child, ast.Call):
                func = child.func
                if isinstance(func, ast.Name) and func.id == "open":
                    out.append((where, "open"))
                elif isinstance(func, ast.Attribute) and func.attr in OPENERS:
                    out.append((where, ast.unparse(func)))
            walk(child, where)

    walk(tree, "<module>")
    return out


def test_every_reader_goes_through_the_gate() -> None:
    found = readers(ROOT)
    bypass = sorted(found - set(ALLOWED))
    assert not bypass, "files read outside planner.intake.jsonio / profiles.jsonio: " + "; ".join(map(str, bypass))
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"ALLOWED entries that match no call any more (remove them): {stale}"


def test_a_bypass_is_found(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "jsonio.py").write_text("import json\n\ndef read_json(p):\n    return json.loads(open(p).read())\n")
    (tmp_path / "profiles" / "groups.py").write_text(
        "import json\nfrom pathlib import Path\n\ndef names(p):\n    return json.loads(Path(p).read_text())\n")
    (tmp_path / "cli.py").write_text("import torch\nstate = torch.load('x.pt')\n")
    assert readers(tmp_path) == {("profiles/groups.py", "names", "json.loads"), ("profiles/groups.py", "names", "Path(p).read_text"),
                                 ("cli.py", "<module>", "torch.load")}
