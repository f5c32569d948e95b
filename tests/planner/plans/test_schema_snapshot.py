"""The committed plan JSON Schema is what the Plan models generate: any field change shows up here
(rerun ``python -m planner.plans.schema_export``, review the diff, bump ``SCHEMA_VERSION`` if meaning changed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner.plans.schema import SCHEMA_VERSION, Plan
from planner.plans.schema_export import SCHEMA_PATH, main, schema_text

REPO = Path(__file__).resolve().parents[3]


def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "planner/plans/plan.schema.json is out of date: run python -m planner.plans.schema_export and review the diff"
    )


def test_schema_names_the_contract_fields() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    top = set(schema["properties"])
    assert {"schema_version", "model", "cluster", "request", "mesh", "schedule", "stages", "estimate", "alternatives", "search"} <= top
    assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION
    assert schema["additionalProperties"] is False  # unknown keys are an error
    assert set(schema["$defs"]["Stage"]["properties"]["layers"]["items"]) == {"type"}  # a JSON array of indices


def test_check_fails_when_a_field_changes(tmp_path: Path) -> None:
    stale = json.loads(schema_text())
    stale["properties"]["renamed_field"] = stale["properties"].pop("alternatives")
    path = tmp_path / "plan.schema.json"
    path.write_text(json.dumps(stale, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert main(["--check", "-o", str(path)]) == 1
    assert main(["-o", str(path)]) == 0
    assert main(["--check", "-o", str(path)]) == 0
    assert json.loads(path.read_text(encoding="utf-8")) == Plan.model_json_schema()


def test_module_runs_as_a_script(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    proc = subprocess.run([sys.executable, "-m", "planner.plans.schema_export", "-o", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert out.read_text(encoding="utf-8") == SCHEMA_PATH.read_text(encoding="utf-8")
