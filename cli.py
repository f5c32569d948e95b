"""``meshplan`` entry point (console script ``meshplan = "cli:main"``, or ``python cli.py``).

Thin by design. Its first statement installs a SIGINT handler that prints one line and exits 130, so
a Ctrl-C at any instant after the interpreter reaches this file ends in one line instead of a
``KeyboardInterrupt`` traceback (from the import machinery, or from code that runs before a ``try``).
It uses the builtin ``_signal`` module, already loaded by the interpreter, because ``signal.py`` would
first import ``enum`` (about 2 ms in which a Ctrl-C still raised). While a command runs, :func:`main`
installs :func:`_on_sigint`: Ctrl-C raises ``KeyboardInterrupt``, so that the command's ``finally``
blocks remove temporary files and stop worker processes, and ``planner.cli.main`` reports it in one
line, exit 130; but inside an import it exits at once, as the first handler does, because an
exception raised inside an extension module's import leaves it half-initialised (pydantic-core's
Rust code then panicked with "failed to import datetime C API", an internal error, exit 1). A
``KeyboardInterrupt`` raised where Python drops exceptions (a ``__del__``, a weakref callback) would
let the command run on; :func:`main` still reports the interrupt when the command returns.
Importing this module (the console script does) installs the handler in the importing process.
"""

import _signal, os  # noqa: E401, I001  (first: see the module docstring)

_signal.signal(_signal.SIGINT, lambda _sig, _frame: (os.write(2, b"meshplan: interrupted\n"), os._exit(130)))

import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from types import FrameType  # noqa: E402

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT, the shell's convention)."""


def _exit_now(_signum: int, _frame: FrameType | None) -> None:
    """SIGINT outside a command: nothing to clean up, so print the line and leave at once."""
    os.write(2, b"meshplan: interrupted\n")
    os._exit(INTERRUPTED)


_caught: list[int] = []
"""One entry per SIGINT :func:`_on_sigint` turned into ``KeyboardInterrupt``."""


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """SIGINT while a command runs: ``KeyboardInterrupt``, or :func:`_exit_now` inside an import."""
    _caught.append(signum)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            _exit_now(signum, frame)
        frame = frame.f_back
    raise KeyboardInterrupt


def _leave_torchrun_rank(code: int) -> None:
    """Under torchrun, once the command has returned (its process group destroyed, its files written
    and closed), flush stdout and stderr and leave with ``os._exit``, skipping the interpreter's
    teardown: there a gloo rank whose process group and DeviceMesh objects are freed in arbitrary order
    at finalization aborted now and then with "terminate called without an active exception" (a
    joinable C++ thread destroyed; SIGABRT, so torchrun failed the whole run after it had finished),
    about 1 clean-clone CI run in 8 of ``test_run_cli``'s 4-rank run, even after the barrier before
    ``destroy_process_group``. Only a command that succeeded leaves this way: a refusal is printed by
    rank 0 alone, and a peer that left at once would have torchrun stop rank 0 before its line.
    Outside torchrun (``TORCHELASTIC_RUN_ID`` unset) it does nothing."""
    if code == 0 and "TORCHELASTIC_RUN_ID" in os.environ and "torch.distributed" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``planner.cli.main``) and return its exit code."""
    try:
        from planner.cli import main as run

        _signal.signal(_signal.SIGINT, _on_sigint)  # a Ctrl-C now unwinds the command
        code = run(argv)
        if _caught and code != INTERRUPTED:  # raised where Python drops exceptions (a __del__, a weakref callback)
            raise KeyboardInterrupt
        _leave_torchrun_rank(code)
        return code
    except KeyboardInterrupt:  # between the two handlers, before planner.cli.main's own try
        sys.stderr.write("meshplan: interrupted\n")
        return INTERRUPTED
    finally:
        _signal.signal(_signal.SIGINT, _exit_now)


if __name__ == "__main__":
    sys.exit(main())
