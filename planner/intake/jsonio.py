"""Reading and writing the JSON files users hand to meshplan, as strictly as a compiler reads source.

Every file a command reads (plans, Hugging Face ``config.json`` files) goes through :func:`read_json`,
which turns every way a file can be wrong into one :class:`~planner.errors.InputError` line: not a
regular file (a FIFO or ``/dev/zero`` would block or never end), too large, not UTF-8, not JSON,
nested deeper than any meshplan file is (Python's parser would raise ``RecursionError``), or holding
``NaN`` / ``Infinity`` (not JSON, RFC 8259 section 6, although Python's parser accepts them).
:func:`dumps` is the writing side: it refuses non-finite numbers instead of printing ``Infinity``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from planner.errors import InputError

MAX_BYTES = 16 * 2**20
"""Largest JSON file read (16 MiB): a plan of a 1,000-layer model is well under 1 MiB."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted; meshplan's own files nest fewer than 10 levels."""


def read_json(path: str | os.PathLike[str], what: str, fix: str) -> Any:
    """The JSON value in ``path``; ``what`` names the file in messages ("plan plan.json") and ``fix``
    says how to repair it ("regenerate it with meshplan plan"). Raises :class:`InputError`."""
    raw = _read_bytes(Path(path), what, fix)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{what} is not UTF-8 text (byte {err.start}); {fix}") from None
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise InputError(f"{what} nests {depth} levels deep (at most {MAX_DEPTH}); {fix}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise InputError(f"{what} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); {fix}") from None
    except ValueError as err:  # NaN / Infinity, from _no_constant
        raise InputError(f"{what} holds {err}, which is not JSON; {fix}") from None


def _read_bytes(path: Path, what: str, fix: str) -> bytes:
    """The file's bytes, refusing non-regular files and files over :data:`MAX_BYTES`."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{what} is not a regular file; give the path of a JSON file")
            if info.st_size > MAX_BYTES:
                raise InputError(f"{what} is {info.st_size / 2**20:.0f} MiB, over the {MAX_BYTES // 2**20} MiB a JSON input may be; {fix}")
            return handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read {what}: {err.strerror or err}; check the path") from None


def check_file(path: str | os.PathLike[str], what: str) -> None:
    """Refuse an existing path that is not a regular file or is over :data:`MAX_BYTES` (a FIFO would
    block a reader, ``/dev/zero`` never end); a missing path is left to the reader's message."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return
    if stat.S_ISDIR(info.st_mode):
        return  # a folder holding a config.json; its file is checked when read
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{what} is not a regular file; give the path of a JSON file")
    if info.st_size > MAX_BYTES:
        raise InputError(f"{what} is {info.st_size / 2**20:.0f} MiB, over the {MAX_BYTES // 2**20} MiB a JSON input may be")


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def nesting_depth(text: str) -> int:
    """Deepest nesting of ``[`` / ``{`` outside strings (a linear scan, no recursion)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN and infinities (``allow_nan=False``) with an InputError."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError as err:
        raise InputError(f"the result holds a number that JSON cannot carry ({err}); check the inputs for infinite or missing values") from None
