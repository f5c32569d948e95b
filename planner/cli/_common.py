"""What every subcommand shares: exit codes, the parser class, argument types, help epilogs.

Kept free of heavy imports (no rich, torch or solvers): this module loads on every invocation.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


def add_retrace(parser: argparse.ArgumentParser) -> None:
    """``--retrace``: the one way a command that reads a plan may run code the plan names."""
    parser.add_argument("--retrace", action="store_true",
                        help="rebuild the model from the plan's model argument, importing and running a factory it names "
                             "(only for plans you trust; by default the plan's own layer list is used)")


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


def check_output(path: str, flag: str) -> None:
    """Refuse an output path before any work: a directory, a missing or read-only directory, or an
    existing path that is not a regular file (a device, a FIFO, a symbolic link: ``-o`` never
    replaces those). ``flag`` names the option in the message."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot write it: {err.strerror}") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{flag} {path} is a directory (give a file name such as {target / 'out'})")
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UsageError(f"{flag} {path} is {kind}; meshplan writes only new or regular files ('-' is stdout)")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: cannot write it: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {path}: cannot write it: directory {parent} is not writable")


def write_output(path: str, text: str, flag: str = "-o", executable: bool = False) -> None:
    """Write ``text`` atomically (a temporary file beside ``path``, then a rename): readers see the old
    file or the new one, never a partial one, and on failure nothing is left behind. Refuses what
    :func:`check_output` refuses; a failure to write is a "cannot write" :class:`UsageError`."""
    from planner.atomic import write_atomic

    check_output(path, flag)
    try:
        write_atomic(path, text, executable)
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot write it: {err.strerror}") from None


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While the body runs, send everything written to stdout to stderr instead: Python prints (a
    model factory's) and the C level (a solver's banner), so that stdout carries only the command's
    own output (``--json``: exactly one JSON object)."""
    sys.stdout.flush()
    saved_stream = sys.stdout
    try:
        fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not file descriptors (a test's capture)
        fd = err_fd = None
    saved_fd = os.dup(fd) if fd is not None else None
    if fd is not None and err_fd is not None:
        sys.stderr.flush()
        os.dup2(err_fd, fd)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved_stream
        if saved_fd is not None and fd is not None:
            os.dup2(saved_fd, fd)
            os.close(saved_fd)
