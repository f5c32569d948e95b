"""Reading and writing the JSON and CSV files users hand to meshplan, as strictly as a compiler reads source.

The reading side is :mod:`profiles.jsonio` (below the planner, so that the cluster and groups loaders
share it), re-exported here with :class:`~planner.errors.InputError` as its error: every file a
command reads goes through :func:`read_bytes` (plans, Hugging Face ``config.json`` files and
cluster files through :func:`read_json`; CSVs through :func:`read_text`), which refuses a file that
is not regular, too large, not UTF-8, not JSON, nested too deep or holding ``NaN`` in one line.
``tests/planner/intake/test_jsonio_gate.py`` fails on any reader elsewhere in the package.
:func:`dumps` is the writing side: it refuses non-finite numbers instead of printing ``Infinity``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from planner.errors import InputError
from profiles import jsonio as _gate
from profiles.jsonio import MAX_BYTES, MAX_DEPTH, nesting_depth

__all__ = ["MAX_BYTES", "MAX_DEPTH", "check_file", "dumps", "nesting_depth", "read_bytes", "read_json", "read_text"]


def read_json(path: str | os.PathLike[str], what: str, fix: str) -> Any:
    """The JSON value in ``path``; ``what`` names the file in messages ("plan plan.json") and ``fix``
    says how to repair it ("regenerate it with meshplan plan"). Raises :class:`InputError`."""
    return _gate.read_json(path, what, fix, error=InputError)


def read_bytes(path: str | os.PathLike[str], what: str, fix: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (:func:`profiles.jsonio.read_bytes`)."""
    return _gate.read_bytes(path, what, fix, limit, error=InputError)


def read_text(path: str | os.PathLike[str], what: str, fix: str, limit: int = MAX_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped)."""
    return _gate.read_text(path, what, fix, limit, error=InputError)


def check_file(path: str | os.PathLike[str], what: str) -> None:
    """Refuse an existing path that is not a regular file or is over :data:`MAX_BYTES`; a missing path
    is left to the reader's message (:func:`profiles.jsonio.check_file`)."""
    _gate.check_file(path, what, error=InputError)


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN and infinities (``allow_nan=False``) with an InputError."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError as err:
        raise InputError(f"the result holds a number that JSON cannot carry ({err}); check the inputs for infinite or missing values") from None
