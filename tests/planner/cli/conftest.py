"""Run the command line as a user does: a separate process, from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

Runner = Callable[..., subprocess.CompletedProcess[str]]


def run_meshplan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python cli.py ARGS`` from the repository root, with stdout and stderr captured (a pipe)."""
    return subprocess.run(
        [sys.executable, str(REPO / "cli.py"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture
def meshplan() -> Runner:
    """The runner for ``python cli.py``."""
    return run_meshplan


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    """The bad-input contract: the exit code, one ``meshplan: error:`` line, no traceback, empty stdout."""
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("meshplan: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.fixture
def one_line_error() -> Callable[[subprocess.CompletedProcess[str], int, str], None]:
    """The checker of the one-line error contract."""
    return _assert_one_line_error
