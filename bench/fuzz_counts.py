"""How many cases the fuzz suite (tests/fuzz) runs against each command.

Runs the suite once with ``MESHPLAN_FUZZ_LOG`` set (``tests/fuzz/fuzzkit.py`` appends each case's
command to it, hypothesis examples included), then prints one row per command: cases run, and the
suite's outcome and wall time. Usage: ``python bench/fuzz_counts.py [pytest args...]``.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_suite(log: Path, extra: list[str]) -> tuple[int, float, str]:
    """Run tests/fuzz logging every case to ``log``; (pytest exit code, wall seconds, last line)."""
    env = {**os.environ, "MESHPLAN_FUZZ_LOG": str(log), "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/fuzz", "-q", "-p", "no:warnings", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    return done.returncode, time.perf_counter() - start, lines[-1] if lines else done.stderr.strip()[-300:]


def counts(log: Path) -> collections.Counter[str]:
    """Cases per command in the log."""
    return collections.Counter(line.strip() or "(none)" for line in log.read_text(encoding="utf-8").splitlines())


def main(argv: list[str]) -> int:
    """Run, then print the table."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "cases.log"
        log.touch()
        code, seconds, last = run_suite(log, argv)
        tally = counts(log)
    print(f"{'command':<14} {'cases':>6}")
    for command, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{command:<14} {n:>6}")
    print(f"{'total':<14} {sum(tally.values()):>6}")
    print(f"pytest exit {code} in {seconds:.0f} s: {last}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
