"""Fixtures of the fuzz suite; the helpers live in ``fuzzkit`` (this folder is put on sys.path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fuzzkit import valid_plan_dict  # noqa: E402



@pytest.fixture(scope="session")
def good_plan() -> dict[str, Any]:
    """The valid plan as a JSON dict (copy it before changing it)."""
    return valid_plan_dict()


@pytest.fixture(scope="session")
def good_plan_file(tmp_path_factory, good_plan) -> Path:
    """The valid plan written to a file."""
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(good_plan, indent=2), encoding="utf-8")
    return path
