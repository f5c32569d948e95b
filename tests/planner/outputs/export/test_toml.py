"""The TOML writer round-trips through the stdlib reader."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.outputs.export import toml

scalars = st.one_of(st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
values = st.one_of(scalars, st.lists(st.lists(st.text(max_size=8), max_size=3), max_size=3))


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), values, max_size=6))
def test_round_trip(table: dict) -> None:
    assert tomllib.loads(toml.dumps({"section": table})) == {"section": table}


def test_header_comments_and_sections() -> None:
    text = toml.dumps({"a": {"x": 1}, "b": {"y": "z"}}, ["first", "second"])
    assert text.startswith("# first\n# second\n\n[a]\nx = 1\n\n[b]\ny = \"z\"\n")


def test_rejects_what_toml_cannot_hold() -> None:
    with pytest.raises(ValueError):
        toml.value(float("nan"))
    with pytest.raises(TypeError):
        toml.value(None)
