"""Reading a plan file: parse it into a :class:`~planner.plans.schema.Plan` and refuse unknown schema
versions, without checking it against its model (``planner.plans.load`` does that)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InputError
from planner.intake.jsonio import read_json
from planner.plans.schema import SCHEMA_VERSION, Plan


def read_plan(path: str | Path) -> Plan:
    """Parse a plan file into a :class:`Plan` without checking it against its model (what
    ``meshplan validate`` then checks); refuse unknown schema versions. Raises :class:`InputError`."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"a plan path must be a string or a path, not {type(path).__name__}")
    data = read_json(path, f"plan {path}", "regenerate it with meshplan plan")
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise InputError(f"plan {path} has schema_version {short(version)}; this meshplan reads {SCHEMA_VERSION!r}: regenerate the plan with this version")
    try:
        return Plan.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InputError(f"plan {path} is malformed at {where[:80]}: {first['msg'].lower()}; regenerate it with meshplan plan") from None


def short(value: Any, most: int = 60) -> str:
    """``repr(value)`` cut to ``most`` characters, for messages about hostile files."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."
