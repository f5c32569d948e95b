"""The top level of ``meshplan`` (``planner/cli/__init__.py``): help, subcommand discovery, exit codes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import build_parser, report
from planner.cli._common import UsageError
from planner.errors import InputError, NoFeasiblePlanError

_REPO = Path(__file__).resolve().parents[3]
_ENTRY_POINTS = [[sys.executable, "cli.py"], [sys.executable, "-c", "import sys, cli; sys.exit(cli.main())"]]
if shutil.which("meshplan"):  # installed with pip install -e .
    _ENTRY_POINTS.append([shutil.which("meshplan") or "meshplan"])


@pytest.mark.parametrize("entry", _ENTRY_POINTS, ids=lambda entry: entry[-1].split()[-1])
def test_top_level_help_shows_commands_examples_and_exit_codes(entry: list[str]) -> None:
    proc = subprocess.run([*entry, "--help"], cwd=_REPO, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for text in ("estimate", "list", "examples:", "meshplan estimate --model gpt3-175b", "exit codes:", "3  no plan"):
        assert text in proc.stdout


@pytest.mark.parametrize("command", ["estimate", "list"])
def test_subcommand_help_shows_examples_and_exit_codes(meshplan, command: str) -> None:
    proc = meshplan(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"examples:\n  meshplan {command}" in proc.stdout
    assert "exit codes:\n  0  success" in proc.stdout
    assert "2  bad input" in proc.stdout


def test_every_module_without_underscore_is_a_subcommand() -> None:
    import pkgutil

    import planner.cli

    modules = sorted(m.name for m in pkgutil.iter_modules(planner.cli.__path__) if not m.name.startswith("_"))
    subparsers = next(action for action in build_parser()._actions if action.dest == "command")
    assert len(subparsers.choices) == len(modules)
    assert {"estimate", "list"} <= set(subparsers.choices)


def test_no_command_is_bad_input(meshplan, one_line_error) -> None:
    one_line_error(meshplan(), 2, "required: <command>")


def test_unknown_command_is_bad_input(meshplan, one_line_error) -> None:
    one_line_error(meshplan("frobnicate"), 2, "invalid choice: 'frobnicate'")


def test_unknown_flag_is_bad_input(meshplan, one_line_error) -> None:
    one_line_error(meshplan("list", "models", "--colour"), 2, "unrecognized arguments: --colour")


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (UsageError("estimate: missing --gpus"), 2, "meshplan: error: estimate: missing --gpus"),
        (InputError("tp 3 bad", "pp 5 bad"), 2, "meshplan: error: tp 3 bad; pp 5 bad"),
        (FileNotFoundError(2, "No such file or directory", "x.json"), 2, "meshplan: error: x.json: No such file"),
        (NoFeasiblePlanError("nothing fits: short by 3 GiB"), 3, "meshplan: error: nothing fits: short by 3 GiB"),
        (KeyError("step_time_s"), 1, "meshplan: error: KeyError: 'step_time_s' (internal error; rerun with"),
    ],
)
def test_report_maps_exceptions_to_one_line_and_exit_code(capsys, exc, code, line) -> None:
    assert report(exc) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(line)


def test_report_joins_multiline_messages(capsys) -> None:
    assert report(RuntimeError("first\n  second")) == 1
    assert capsys.readouterr().err.startswith("meshplan: error: RuntimeError: first second (internal error")


def test_debug_env_adds_the_traceback(capsys, monkeypatch) -> None:
    monkeypatch.setenv("MESHPLAN_DEBUG", "1")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        assert report(exc) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.splitlines()[-1].startswith("meshplan: error: ValueError: boom (internal error")
