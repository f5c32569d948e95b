"""Ctrl-C at any instant of ``meshplan plan``: SIGINT at a delay drawn from 0.01-0.1 s, over N tries.

Each try starts ``python cli.py plan ...`` (a plan that takes seconds, so every signal lands while it
runs), sends SIGINT after a seeded random delay and sorts the outcome:

- ``clean``: exit 130 and exactly one stderr line, ``meshplan: interrupted``, empty stdout;
- ``exempt``: the signal landed before meshplan's own code started. ``cli.py`` installs its handler
  as its first statement (:data:`HANDLER_LINE`); from then on a SIGINT either ends in meshplan's one
  line or raises inside meshplan's frames, which any traceback would name (``cli.main`` also reports
  an interrupt Python dropped). So a try is exempt when what it left names no frame of meshplan's:
  it died of the signal before Python installed its own handler (exit -2, nothing printed), or it
  printed a ``KeyboardInterrupt`` (a traceback, or a bare line) none of whose frames lies in
  ``cli.py`` past the handler line nor in the ``planner`` package, and exited -2, 1, or 0 when
  CPython dropped it and ran on. Seen under load: tracebacks from ``site`` imports; "line 0" of
  ``cli.py`` (the signal came while it was compiled); "Failed checking if argv[0] is an import path
  entry" from ``<frozen zipimport>`` (CPython prints it and runs the script anyway, exit 0); "Exception
  ignored in" an importlib callback (exit 0); a bare line with exit 1; CPython's own "python: failed
  to set __main__.__loader__" (exit 1: the signal came while CPython set up ``__main__`` for
  ``cli.py``, before its first line ran; ``_PyRun_SimpleFileObject`` in ``Python/pythonrun.c``);
- ``finished``: the plan ended (exit 0) before the signal came (only at delays of about 0.5 s);
- ``bad``: anything else (a traceback from meshplan's code, a second line, another exit code).

Usage: ``python bench/sigint.py [TRIES] [SEED]`` (default 50 tries, seed 0). Prints the counts and
each bad try's stderr; exits 1 if any try is bad.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-a100", "--gpus", "64", "--global-batch", "512", "--seq-len", "4096"]
"""A plan that runs for seconds, so the signal always comes before it ends."""
HANDLER_LINE = next((i for i, line in enumerate((ROOT / "cli.py").read_text(encoding="utf-8").splitlines(), 1)
                    if line.startswith("_signal.signal(")), 0)
"""The line of ``cli.py`` that installs the SIGINT handler (its first statement after the imports it
needs); 0 when it has none (then every frame in ``cli.py`` counts as meshplan's)."""
_LOADER_FAILED = "python: failed to set __main__.__loader__\n"
"""What CPython prints (and exits 1) when an exception, here the interrupt, lands while it sets up
``__main__`` for the script, before the script's first line (``Python/pythonrun.c``)."""
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def kind(code: int, out: str, err: str) -> str:
    """``clean``, ``exempt``, ``finished`` or ``bad`` for one try (see the module docstring)."""
    if code == 130 and err == "meshplan: interrupted\n" and not out:
        return "clean"
    if code == -signal.SIGINT and not err:
        return "exempt"  # killed by the signal's default action: Python had not installed its handler
    if code in (0, 1, -signal.SIGINT) and "KeyboardInterrupt" in err and "interrupted" not in err and not _any_ours(err):
        return "exempt"  # raised by Python's own handler in start-up code: no frame of meshplan's
    if code == 1 and err == _LOADER_FAILED:
        return "exempt"  # CPython gave up setting up __main__ before cli.py's first line ran
    if code == 0 and "interrupted" not in err and "Traceback" not in err and "KeyboardInterrupt" not in err:
        return "finished"
    return "bad"


def _any_ours(err: str) -> bool:
    """Whether any traceback frame in ``err`` is meshplan's code running with its handler installed."""
    return any(_ours(path, int(line)) for path, line in _FRAME.findall(err))


def _ours(path: str, line: int) -> bool:
    """Whether a traceback frame is meshplan's code running with its handler installed."""
    file = Path(path).resolve()
    if file == ROOT / "cli.py":
        return line > HANDLER_LINE
    return (ROOT / "planner") in file.parents


def _default_sigint() -> None:
    """In the child: SIGINT's default action, as in a terminal (a shell's background job starts with
    SIGINT ignored; Python then keeps ignoring it until ``cli.py`` installs its handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one_try(delay: float) -> tuple[str, str]:
    """Start ``meshplan plan``, send SIGINT after ``delay`` seconds: the outcome's kind and its exit
    code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *PLAN], cwd=ROOT, env=env, preexec_fn=_default_sigint,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return kind(proc.returncode, out, err), f"exit {proc.returncode}\n{err}"


def run(tries: int, seed: int, low: float = 0.01, high: float = 0.1) -> dict[str, list[tuple[float, str]]]:
    """``tries`` tries at delays drawn uniformly from [low, high]: (delay, stderr) by kind."""
    draw = random.Random(seed)
    found: dict[str, list[tuple[float, str]]] = {"clean": [], "exempt": [], "finished": [], "bad": []}
    for _ in range(tries):
        delay = draw.uniform(low, high)
        outcome, err = one_try(delay)
        found[outcome].append((delay, err))
    return found


def main() -> int:
    """Run the tries and print the counts (and every bad try)."""
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    found = run(tries, seed)
    print(f"SIGINT at 0.01-0.1 s into meshplan plan, {tries} tries (seed {seed}):")
    for name, items in found.items():
        delays = ", ".join(f"{d:.3f}" for d, _ in items[:8])
        print(f"  {name:<6} {len(items):>3}" + (f"  (delays s: {delays}{' ...' if len(items) > 8 else ''})" if items and name != "clean" else ""))
    for delay, err in found["bad"]:
        print(f"--- bad try at {delay:.3f} s:\n{err}")
    return 1 if found["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
