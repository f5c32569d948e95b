"""Model factories that misbehave: exit, print, raise, return nothing useful. Each is exit 2 with
one line (and a factory's prints never reach stdout)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, assert_refused, run_cli

FACTORY_LIMIT_S = 30.0
"""A factory is user code that meshplan imports, builds and traces (torch work): a longer limit."""

FACTORIES = '''
import sys
from torch import nn
def exits(): sys.exit(CODE)
def raises(): raise RuntimeError("boom")
def keyboard(): raise LookupError("x")
def nothing(): return None
def number(): return 42
def no_params(): return nn.ReLU()
def empty(): return nn.Sequential()
def prints():
    print("noise from the factory")
    return nn.Sequential(nn.Embedding(256, 32), nn.Linear(32, 32), nn.Linear(32, 256))
'''


@pytest.fixture(scope="module")
def factory_file(tmp_path_factory):
    def write(code: object) -> str:
        folder = tmp_path_factory.mktemp("fac")
        path = folder / "f.py"
        path.write_text(FACTORIES.replace("CODE", repr(code)), encoding="utf-8")
        return str(path)

    return write


ESTIMATE = ("--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq-len", "128")


@settings(FUZZ, max_examples=20)
@given(name=st.sampled_from(["exits", "raises", "keyboard", "nothing", "number", "no_params", "empty", "missing"]),
       code=st.one_of(st.none(), st.integers(-3, 300), st.text(max_size=5)))
def test_misbehaving_factories(factory_file, name, code) -> None:
    path = factory_file(code)
    assert_refused("estimate", "--model", f"{path}:{name}", *ESTIMATE, "--json", limit_s=FACTORY_LIMIT_S)


def test_a_printing_factory_leaves_stdout_to_the_json(factory_file) -> None:
    code, out, err = run_cli("estimate", "--model", f"{factory_file(0)}:prints", *ESTIMATE, "--json")
    assert code == 0, err
    json.loads(out)  # exactly one JSON object
    assert "noise from the factory" in err and "noise" not in out
