"""The ``meshplan`` command line: one module per subcommand, discovered at start-up.

Every public module in this package (a name without a leading underscore) is a subcommand: it
exposes ``register(subparsers)``, which adds its parser and sets ``run`` (``argparse.Namespace ->
int`` exit code) as the parser's default. Adding a subcommand is adding one module.

``main`` maps failures to the exit codes of the CLI contract (DESIGN.md): 0 success, 2 bad input
(one ``meshplan: error: ...`` line on stderr, no traceback), 3 no plan fits, 1 internal error.
Set ``MESHPLAN_DEBUG=1`` to also print the traceback. Subcommands import their heavy dependencies
inside ``run`` so that start-up stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Sequence

from planner.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_NO_PLAN,
    Parser,
    UsageError,
    epilog,
)

_DESCRIPTION = """\
meshplan plans how to split LLM training over GPUs (data, tensor, pipeline, context and expert
parallelism, ZeRO, recomputation, micro-batching) with an analytical cost model, on a CPU."""

_EXAMPLES = """\
  meshplan estimate --model gpt3-175b --cluster dgx-a100 --gpus 1024 \\
      --global-batch 1536 --seq-len 2048 --tp 8 --pp 16
  meshplan estimate --plan plan.json --json
  meshplan list models
  meshplan <command> --help"""


def build_parser() -> Parser:
    """The top-level parser with every subcommand module of this package registered."""
    parser = Parser(
        prog="meshplan",
        description=_DESCRIPTION,
        epilog=epilog(_EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", title="commands", required=True)
    for name in _command_modules():
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def _command_modules() -> list[str]:
    """Names of the subcommand modules: every module here whose name has no leading underscore."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    try:  # first: a Ctrl-C from here on is reported by report() in one line
        from planner.noise import silence_third_party

        silence_third_party()  # before any subcommand imports torch or transformers
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.run(args)
    except BaseException as exc:  # every failure leaves as one line and an exit code
        return report(exc)


def report(exc: BaseException) -> int:
    """Print the one-line error for ``exc`` on stderr and return its exit code."""
    if isinstance(exc, SystemExit):  # --help and --version exit through argparse
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
    if isinstance(exc, KeyboardInterrupt):
        print("meshplan: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, BrokenPipeError):  # stdout closed early (`meshplan list models | head -1`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet flush at exit
        return 0
    if os.environ.get("MESHPLAN_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    code = _exit_code(exc)
    message = _one_line(exc)
    if code == EXIT_INTERNAL:
        message = f"{type(exc).__name__}: {message} (internal error; rerun with MESHPLAN_DEBUG=1 for the traceback)"
    _print_error(f"meshplan: error: {message}")
    return code


def _print_error(line: str) -> None:
    """Print one line on stderr, whatever its characters (a path with undecodable bytes arrives as
    surrogates, which a UTF-8 stream cannot encode: they print as backslash escapes)."""
    sys.stderr.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    sys.stderr.flush()


def _exit_code(exc: BaseException) -> int:
    """2 for the caller's mistakes (files included), 3 when no plan fits, 1 for anything else."""
    from planner.errors import InputError, NoFeasiblePlanError
    from profiles import ProfileError

    if isinstance(exc, NoFeasiblePlanError):
        return EXIT_NO_PLAN
    if isinstance(exc, (UsageError, InputError, ProfileError, OSError)):
        return EXIT_BAD_INPUT
    return EXIT_INTERNAL


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (files not found keep their path and reason)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())
