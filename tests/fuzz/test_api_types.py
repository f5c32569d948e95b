"""The Python API takes arguments of the documented types only: anything else is an InputError
(never a TypeError, never silently accepted: ``gpus=True``, ``gpus='8'``, ``time_limit_s=nan``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.errors import InputError

from fuzzkit import FUZZ

WRONG = st.one_of(st.booleans(), st.text(max_size=5), st.floats(), st.none(), st.lists(st.integers(), max_size=2),
                  st.integers(max_value=0), st.integers(min_value=2**41, max_value=10**50))
BASE = dict(model="llama3.1-8b", cluster="dgx-h100", gpus=8, global_batch=32, seq_len=4096)


@settings(FUZZ, max_examples=60)
@given(name=st.sampled_from(["gpus", "global_batch", "seq_len", "tp", "pp", "cp", "vpp", "micro_batch", "zero", "sp", "recompute"]), value=WRONG)
def test_estimate_arguments(name, value) -> None:
    if (name == "sp" and value in (None, True, False)) or (name == "zero" and value is None):
        return  # documented values
    with pytest.raises(InputError) as err:
        planner.estimate(**{**BASE, name: value})
    assert "\n" not in str(err.value)


@settings(FUZZ, max_examples=40)
@given(name=st.sampled_from(["gpus", "global_batch", "seq_len", "top_k", "time_limit_s", "memory_headroom_gib", "target"]), value=WRONG)
def test_plan_arguments(name, value) -> None:
    ok = (name == "time_limit_s" and (value is None or (isinstance(value, float) and 0 < value <= 604800)))
    ok |= name == "memory_headroom_gib" and (value is None or (isinstance(value, float) and 0 <= value <= 1e6))  # None: the cluster's measured default
    ok |= name == "top_k" and type(value) is int and value == 0  # documented: no alternatives
    if ok:
        return
    with pytest.raises(InputError) as err:
        planner.plan(**{**BASE, name: value})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs", [dict(gpus=True), dict(gpus="8"), dict(time_limit_s=math.nan), dict(time_limit_s=-1.0), dict(top_k=True),
                                    dict(gpus=2**21), dict(memory_headroom_gib=math.inf), dict(cluster=42), dict(model=3.5)])
def test_reported_regressions(kwargs) -> None:
    with pytest.raises(InputError):
        planner.plan(**{**BASE, **kwargs})


@pytest.mark.parametrize("path", ["/dev/null", "/nonexistent.json", 42, None])
def test_load_plan_and_estimate_plan(path) -> None:
    with pytest.raises(InputError):
        planner.load_plan(path)
    with pytest.raises(InputError):
        planner.estimate_plan(path)
