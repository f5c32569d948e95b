"""The gate every file a user hands to meshplan passes through, as strictly as a compiler reads source.

It lives here, below the planner (``planner -> profiles -> costmodel``), so that the cluster and
groups loaders of this package use it too; ``planner.intake.jsonio`` re-exports it with
:class:`~planner.errors.InputError` as the error. Every file goes through :func:`read_bytes` (JSON
through :func:`read_json`, CSV through :func:`read_text`), which turns every way a file can be wrong
into one line of the caller's ``error`` class (default :class:`~profiles.errors.ProfileError`): not a
regular file (a FIFO or ``/dev/zero`` would block or never end), too large, not UTF-8, not JSON,
nested deeper than any meshplan file is (Python's parser would raise ``RecursionError``), or holding
``NaN`` / ``Infinity`` (not JSON, RFC 8259 section 6, although Python's parser accepts them).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from typing import Any

from profiles.errors import ProfileError

Error = Callable[[str], Exception]
"""What the gate raises, built from the one-line message."""

MAX_BYTES = 16 * 2**20
"""Largest JSON file read (16 MiB): a plan of a 1,000-layer model is well under 1 MiB."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted; meshplan's own files nest fewer than 10 levels."""


def read_json(path: str | os.PathLike[str], what: str, fix: str, error: Error = ProfileError) -> Any:
    """The JSON value in ``path``; ``what`` names the file in messages ("plan plan.json") and ``fix``
    says how to repair it ("regenerate it with meshplan plan"). Raises ``error``."""
    raw = read_bytes(path, what, fix, error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{what} is not UTF-8 text (byte {err.start}); {fix}") from None
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise error(f"{what} nests {depth} levels deep (at most {MAX_DEPTH}); {fix}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise error(f"{what} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); {fix}") from None
    except ValueError as err:  # NaN / Infinity, from _no_constant
        raise error(f"{what} holds {err}, which is not JSON; {fix}") from None


def read_bytes(path: str | os.PathLike[str], what: str, fix: str, limit: int = MAX_BYTES, error: Error = ProfileError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. The file is opened without
    blocking (``O_NONBLOCK``: a FIFO opens at once instead of waiting for a writer) and checked on the
    open descriptor before anything is read, so a FIFO, a device (``/dev/zero``, also behind a
    symbolic link) or a directory is refused at once, and a file over ``limit`` unread."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise error(f"cannot read {what}: {err.strerror or err}; check the path") from None
    except ValueError:  # an embedded NUL
        raise error(f"cannot read {what}: the path holds a NUL character; check the path") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} is {_kind(info.st_mode)}, not a regular file; give the path of a file")
        raise error(f"{what} is {_size(info.st_size)}, over the {_size(limit)} such a file may be; {fix}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as err:
            raise error(f"cannot read {what}: {err.strerror or err}; check the file") from None
    if len(data) > limit:  # grew while read
        raise error(f"{what} is over the {_size(limit)} such a file may be; {fix}")
    return data


def read_text(path: str | os.PathLike[str], what: str, fix: str, limit: int = MAX_BYTES, error: Error = ProfileError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped)."""
    raw = read_bytes(path, what, fix, limit, error)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(f"{what} is not UTF-8 text (byte {err.start}); {fix}") from None


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    """A byte count in MiB, or KiB under 1 MiB."""
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def check_file(path: str | os.PathLike[str], what: str, error: Error = ProfileError) -> None:
    """Refuse an existing path that is not a regular file or is over :data:`MAX_BYTES` (a FIFO would
    block a reader, ``/dev/zero`` never end); a missing path is left to the reader's message."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return
    if stat.S_ISDIR(info.st_mode):
        return  # a folder holding a config.json; its file is checked when read
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} is {_kind(info.st_mode)}, not a regular file; give the path of a JSON file")
    if info.st_size > MAX_BYTES:
        raise error(f"{what} is {info.st_size / 2**20:.0f} MiB, over the {MAX_BYTES // 2**20} MiB a JSON input may be")


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def nesting_depth(text: str) -> int:
    """Deepest nesting of ``[`` / ``{`` outside strings, in time linear in the text: strings are
    blanked by a regular expression that cannot backtrack (possessive loops, and an unterminated
    string ends at the end of the text instead of failing and being retried from every later
    quote), then the depth is the largest prefix sum of +1 / -1 over what is left."""
    bare = _NOT_BRACKET.sub("", _STRING.sub('""', text))
    if not bare:
        return 0
    import numpy as np

    codes = np.frombuffer(bare.encode("ascii"), dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
