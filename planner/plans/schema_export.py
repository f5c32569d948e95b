"""Export the plan JSON Schema: ``python -m planner.plans.schema_export [--check] [-o PATH]``.

The committed ``planner/plans/plan.schema.json`` is generated from :class:`planner.plans.schema.Plan` by
pydantic's ``model_json_schema()``; ``tests/planner/plans/test_schema_snapshot.py`` fails when the models
and the file differ, so that every field change is deliberate (rerun this module, review the diff,
and bump ``SCHEMA_VERSION`` when a field changes meaning).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("plan.schema.json")
"""Where the committed schema lives."""


def schema_text() -> str:
    """The plan JSON Schema as deterministic text (sorted keys, two-space indent, final newline)."""
    from planner.plans.schema import Plan

    return json.dumps(Plan.model_json_schema(), indent=2, sort_keys=True) + "\n"


def _read(path: Path) -> str | None:
    """The text of the schema file through the gate (``planner.intake.jsonio``), None when refused."""
    from planner.errors import InputError
    from planner.intake.jsonio import read_text

    try:
        return read_text(path, f"schema file {path}", "regenerate it")
    except InputError:
        return None  # not a regular file, too large or not UTF-8: out of date


def main(argv: list[str] | None = None) -> int:
    """Write the schema (default ``planner/plans/plan.schema.json``), or with ``--check`` exit 1 when the
    file is out of date."""
    parser = argparse.ArgumentParser(prog="python -m planner.plans.schema_export", description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=SCHEMA_PATH, help="schema file (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when they differ")
    args = parser.parse_args(argv)
    text = schema_text()
    if args.check:
        same = args.output.exists() and _read(args.output) == text
        print(f"{args.output}: {'up to date' if same else 'out of date (run python -m planner.plans.schema_export)'}", file=sys.stderr)
        return 0 if same else 1
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text.encode())} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
