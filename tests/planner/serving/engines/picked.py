"""Take chosen top-level definitions out of an engine's module without importing it.

An engine's utility module (``sglang/srt/utils.py``, ``vllm/utils/__init__.py``) imports the
engine's whole runtime (CUDA kernels, ZeroMQ, psutil ...), but its argument code needs only a few
plain helpers and constants from it. :func:`pick` parses the real file with ``ast`` and runs only
the named assignments and functions (the engine's own code, unchanged) in a namespace that holds
the standard-library modules they use.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path
from typing import Any


def pick(path: Path, names: tuple[str, ...], module: str, stdlib: tuple[str, ...] = ("re", "socket", "ipaddress", "os", "json")) -> types.ModuleType:
    """A module named ``module`` holding ``names`` as ``path`` defines them; raises KeyError for a
    name the file does not define at top level (the engine moved it: the shim must follow)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    chosen: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            chosen[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in names:
                    chosen[target.id] = node
    missing = [n for n in names if n not in chosen]
    if missing:
        raise KeyError(f"{path.name} defines no {', '.join(missing)}")
    out = types.ModuleType(module)
    space: dict[str, Any] = out.__dict__
    for name in stdlib:
        space[name] = importlib.import_module(name)
    for typing_name in ("Any", "Dict", "List", "Optional", "Tuple", "Union"):
        space[typing_name] = getattr(importlib.import_module("typing"), typing_name)
    space["Path"] = Path
    code = ast.Module(body=[chosen[n] for n in names], type_ignores=[])
    exec(compile(code, str(path), "exec"), space)  # noqa: S102  (the engine's own definitions)
    return out
