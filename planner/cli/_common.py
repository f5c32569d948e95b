"""What every subcommand shares: exit codes, the parser class, argument types, help epilogs.

Kept free of heavy imports (no rich, torch or solvers): this module loads on every invocation.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_OK = 0
"""The command did what was asked."""
EXIT_INTERNAL = 1
"""A bug: an exception nobody expected."""
EXIT_BAD_INPUT = 2
"""Bad input: flags, files, presets or a configuration that cannot run."""
EXIT_NO_PLAN = 3
"""No plan fits in memory."""

EXIT_CODES_TEXT = """\
exit codes:
  0  success
  1  internal error (rerun with MESHPLAN_DEBUG=1 for the traceback)
  2  bad input (one line on stderr says what and how to fix it)
  3  no plan fits in memory"""


class UsageError(Exception):
    """A command-line mistake found by argparse (unknown flag, bad value); the CLI exits 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`UsageError` instead of printing usage and exiting.

    ``main`` prints the message as the single ``meshplan: error: ...`` line the CLI contract asks for.
    Subparsers inherit the class, so every subcommand behaves the same.
    """

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing the usage block; add the subcommand so the line stands alone."""
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        prefix = f"{command}: " if command else ""
        raise UsageError(f"{prefix}{message} (see '{self.prog} --help')")


def epilog(examples: str) -> str:
    """Help text shown after the options: the examples, then the exit codes."""
    return f"examples:\n{examples.rstrip()}\n\n{EXIT_CODES_TEXT}"


def positive_int(text: str) -> int:
    """argparse type: an integer greater than zero, with a message that repeats what was typed."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got '{text}'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got '{text}'")
    return value


def add_subparser(
    subparsers: argparse._SubParsersAction, name: str, summary: str, description: str, examples: str
) -> argparse.ArgumentParser:
    """Add one subcommand with the shared formatting: a one-line summary, a description, examples."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog(examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
