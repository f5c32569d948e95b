"""Whole-process wall time of ``meshplan serve-plan`` for the issue's two speed targets.

Usage: python bench/serving_speed.py [repeats]
Targets (issue 23): DeepSeek-R1 on 64 H200 with disaggregation searched within 10 s; Llama 3.1 70B
on 8 H100 within 2 s. Prints each run's wall time and the best of ``repeats`` (default 3).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "deepseek-r1 64x H200, disaggregation auto (target 10 s)": [
        "--model", "deepseek-r1", "--cluster", "dgx-h200", "--gpus", "64", "--isl", "4000", "--osl", "1000",
        "--ttft-ms", "2000", "--tpot-ms", "50", "--precision", "fp8", "--disaggregation", "auto"],
    "llama3.1-70b 8x H100 (target 2 s)": [
        "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "8", "--isl", "1000", "--osl", "1000",
        "--ttft-ms", "1000", "--tpot-ms", "50", "--precision", "fp8"],
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", type=int, default=3, help="runs per case; the best is kept (default 3)")
    repeats = parser.parse_args(argv[1:]).repeats
    if repeats < 1:
        parser.error(f"repeats must be at least 1, got {repeats}")
    for name, args in CASES.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, str(REPO / "cli.py"), "serve-plan", *args, "--json"], cwd=REPO, check=True,
                           capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"{name}: best {min(times):.2f} s, runs " + ", ".join(f"{t:.2f}" for t in times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
