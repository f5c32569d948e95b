"""Start-up benchmark: wall time of ``meshplan estimate ... --json`` on a preset (median of 5 runs).

The CLI contract asks for under 0.5 s in total. Run from anywhere: ``python bench/cli_startup.py``.
Prints the median, every run, and the ratio to the 0.5 s budget (below 1.0 is within budget). To see
what the time goes into, run the same command with ``python -X importtime``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 0.5
"""Start-up budget of the CLI contract (issue: 'meshplan estimate on a preset prints in under 0.5 s')."""
RUNS = 5
COMMAND = [
    sys.executable, str(REPO / "cli.py"), "estimate", "--model", "gpt3-175b", "--cluster", "dgx-a100",
    "--gpus", "1024", "--global-batch", "1536", "--seq-len", "2048", "--tp", "8", "--pp", "16", "--json",
]  # fmt: skip


def time_once() -> float:
    """Wall seconds of one run of :data:`COMMAND`; raises if the command fails."""
    start = time.perf_counter()
    proc = subprocess.run(COMMAND, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"command failed with exit {proc.returncode}: {proc.stderr.strip()}")
    return elapsed


def main() -> None:
    """Warm the file cache with one run, then time :data:`RUNS` runs and print the median."""
    time_once()
    times = [time_once() for _ in range(RUNS)]
    median = statistics.median(times)
    print("command: meshplan " + " ".join(COMMAND[2:]))
    print("runs (s): " + ", ".join(f"{t:.3f}" for t in times))
    print(f"median wall time: {median:.3f} s; ratio to the {BUDGET_S} s budget: {median / BUDGET_S:.2f}")


if __name__ == "__main__":
    main()
