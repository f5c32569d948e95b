"""Whole-process wall time of ``meshplan plan`` for the four cases of issue 3's acceptance.

Usage: python bench/search_speed.py [--target native|megatron|torchtitan|deepspeed] [--only N]
Runs ``python cli.py plan ... -o <tmp>/plan.json`` as a user does (start-up, search, validation and
writing included) and prints, per case, the wall time, the target of issue 3 on a 2-core machine, the
ratio, and the plan's search status, gap and predicted step time. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = [
    # (label, model, cluster, gpus, global batch, seq len, target seconds)
    ("GPT-3 175B, 1,024 A100", "gpt3-175b", "dgx-a100", 1024, 1536, 2048, 5.0),
    ("GPT 1T (Narayanan et al.), 3,072 A100", "gpt-1t", "dgx-a100", 3072, 3072, 2048, 15.0),
    ("Llama 3.1 405B, 16,384 H100", "llama3.1-405b", "dgx-h100", 16384, 2048, 8192, 30.0),
    ("Mixtral 8x7B, 256 H100", "mixtral-8x7b", "dgx-h100", 256, 1024, 4096, 10.0),
]


def run_case(model: str, cluster: str, gpus: int, batch: int, seq: int, target: str, out: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(wall seconds, finished process) of one ``meshplan plan`` run."""
    argv = [sys.executable, str(REPO / "cli.py"), "plan", "--model", model, "--cluster", cluster, "--gpus", str(gpus),
            "--global-batch", str(batch), "--seq-len", str(seq), "--target", target, "-o", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="native", choices=("native", "megatron", "torchtitan", "deepspeed"))
    parser.add_argument("--only", type=int, help="run only case N (1-4)")
    args = parser.parse_args(argv[1:])
    cases = [CASES[args.only - 1]] if args.only else CASES
    print(f"{'case':<40} {'wall s':>7} {'target s':>8} {'ratio':>6}  result")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for label, model, cluster, gpus, batch, seq, target_s in cases:
            wall, proc = run_case(model, cluster, gpus, batch, seq, args.target, Path(tmp) / "plan.json")
            worst = max(worst, wall / target_s)
            if proc.returncode == 0:
                plan = json.loads((Path(tmp) / "plan.json").read_text())
                s = plan["search"]
                result = (f"{s['status']}, gap {s['optimality_gap']:.2%}, step {plan['estimate']['step_time_s']:.3f} s, "
                          f"{s['candidates_evaluated']:,} evaluated")
            else:
                result = f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"
            print(f"{label:<40} {wall:>7.2f} {target_s:>8.0f} {wall / target_s:>6.2f}  {result}", flush=True)
    print(f"worst ratio to target: {worst:.2f} ({'within' if worst <= 1 else 'over'} the targets)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
