"""Ctrl-C at any instant of ``meshplan plan`` ends in exit 130 and one line (``bench/sigint.py``, 10 tries)."""

from __future__ import annotations

import ast
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sigint  # noqa: E402

CLI = str(sigint.ROOT / "cli.py")
PLANNER = str(sigint.ROOT / "planner" / "cli" / "__init__.py")


def _traceback(*frames: tuple[str, int]) -> str:
    body = "".join(f'  File "{path}", line {line}, in <module>\n' for path, line in frames)
    return f"Traceback (most recent call last):\n{body}KeyboardInterrupt\n"


def test_ten_interrupts_early_in_plan_end_in_one_line() -> None:
    found = sigint.run(10, seed=1)
    assert not found["bad"], found["bad"]
    # On a loaded machine start-up alone can outlast 0.1 s (every try exempt): later tries make sure
    # that some land in meshplan's code, so that the check cannot pass vacuously.
    late = sigint.run(5, seed=2, low=0.15, high=0.4)
    assert not late["bad"], late["bad"]
    assert len(found["clean"]) + len(late["clean"]) >= 3


def test_the_handler_line_is_found_and_comes_first() -> None:
    body = ast.parse((sigint.ROOT / "cli.py").read_text(encoding="utf-8")).body
    docstring, imports, handler = body[:3]
    assert isinstance(docstring, ast.Expr) and isinstance(imports, ast.Import)
    assert [alias.name for alias in imports.names] == ["_signal", "os"]  # both loaded by the interpreter already
    assert handler.lineno == sigint.HANDLER_LINE and "SIGINT" in ast.unparse(handler)


def test_outcomes_are_sorted_by_where_the_signal_landed() -> None:
    assert sigint.kind(130, "", "meshplan: interrupted\n") == "clean"
    assert sigint.kind(-signal.SIGINT, "", "") == "exempt"
    assert sigint.kind(1, "", _traceback(("<frozen site>", 5), ("/usr/lib/python3.11/ipaddress.py", 9))) == "exempt"
    assert sigint.kind(1, "", _traceback((CLI, sigint.HANDLER_LINE))) == "exempt"
    assert sigint.kind(1, "", _traceback((CLI, sigint.HANDLER_LINE + 1))) == "bad"
    assert sigint.kind(1, "", _traceback((CLI, 40), (PLANNER, 70))) == "bad"
    assert sigint.kind(-signal.SIGINT, "", "KeyboardInterrupt\n") == "exempt"  # no Python frame ran
    assert sigint.kind(1, "", "KeyboardInterrupt\n") == "exempt"  # seen once under load, at 0.104 s
    assert sigint.kind(-signal.SIGINT, "", _traceback((CLI, 0))) == "exempt"  # arrived while cli.py was compiled
    assert sigint.kind(130, "", "KeyboardInterrupt\n") == "bad"
    loader = "python: failed to set __main__.__loader__\n"
    assert sigint.kind(1, "", loader) == "exempt"  # seen under load at 0.033 s: before cli.py's first line
    assert sigint.kind(1, "", loader + "meshplan: interrupted\n") == "bad"
    zipimport = ("Failed checking if argv[0] is an import path entry\n" + _traceback(("<frozen zipimport>", 94))
                 + "meshplan: searched in 1.8 s (optimal)\n")
    assert sigint.kind(0, "{}", zipimport) == "exempt"  # seen under load at 0.118 s: CPython ran on
    assert sigint.kind(130, "", "meshplan: interrupted\nmeshplan: interrupted\n") == "bad"
    assert sigint.kind(0, "{}", "meshplan: searched in 0.2 s (optimal)\n") == "finished"
    ignored = "Exception ignored in: <function _get_module_lock.<locals>.cb at 0x7f>\nTraceback (most recent call last):\n"
    frame = '  File "<frozen importlib._bootstrap>", line 207, in cb\n'
    searched = "KeyboardInterrupt: \nmeshplan: searched in 0.7 s (optimal)\n"
    assert sigint.kind(0, "{}", ignored + frame + searched) == "exempt"  # seen once under load, at 0.069 s
    assert sigint.kind(0, "{}", ignored + f'  File "{PLANNER}", line 70, in main\n' + searched) == "bad"
