"""Fixtures for the trace tests: the plain-torch model zoo (``zoo.py``) as a module and as factories."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ZOO_PATH = Path(__file__).with_name("zoo.py")


@pytest.fixture(scope="session")
def zoo() -> ModuleType:
    """``zoo.py`` imported as a module (its classes and size constants)."""
    spec = importlib.util.spec_from_file_location("meshplan_trace_zoo", ZOO_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def factory() -> object:
    """``factory("gpt")`` -> the ``path/to/zoo.py:gpt`` argument of ``--model``."""
    return lambda name: f"{ZOO_PATH}:{name}"
