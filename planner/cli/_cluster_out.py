"""Writing and showing the cluster files ``meshplan profile`` and ``meshplan calibrate`` produce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.cli._common import UsageError, write_output


def check_target(path: str) -> None:
    """Refuse, before any work, an output path whose directory is missing or that is a directory."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"-o {path} is a directory (give a file name such as {target / 'cluster.json'})")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"-o {path}: cannot write it: directory {parent} does not exist")


def write_cluster_file(path: str, entry: dict[str, Any]) -> None:
    """Write ``entry`` as indented JSON atomically (:func:`planner.cli._common.write_output`), so a
    failure never leaves a half-written cluster file."""
    check_target(path)
    write_output(path, json.dumps(entry, indent=2) + "\n")


def resolve_cluster_entry(entry: dict[str, Any], path: str) -> None:
    """Check, before writing, that ``entry`` loads as the cluster file ``path`` will be (the loader's
    own validation); a failure is an internal error, never a file that --cluster then refuses."""
    from profiles import ProfileError
    from profiles.entries import build_cluster

    def inline_only(name: str, where: str) -> Any:
        raise ProfileError(f"{where}: the GPU must be written inline, not as the name '{name}'")

    try:
        build_cluster(entry, f"cluster file '{path}'", Path(path).stem, inline_only)
    except ProfileError as err:
        raise RuntimeError(f"the cluster about to be written does not load: {err}") from None


def fmt(value: float | None) -> str:
    """A measurement in 4 significant digits, ``-`` when absent."""
    return "-" if value is None else f"{value:.4g}"
