"""Whole-process wall time of ``meshplan plan`` for the four cases of issue 3's acceptance, and for
two models whose blocks differ (issue 14: DeepSeek-V3 on 2,048 GPUs, a 12-block alternating dense /
MoE model on 8, each under 30 s; DeepSeek-V3 is the ``deepseek-v3`` preset with multi-head latent
attention, ``bench/mixed_models.py`` builds the other).

Usage: python bench/search_speed.py [--target native|megatron|torchtitan|deepspeed] [--only N] [--no-limits]
Runs ``python cli.py plan ... -o <tmp>/plan.json`` as a user does (start-up, search, validation and
writing included) and prints, per case, the wall time, the CPU time of the process (on a shared
machine the honest figure), the target on a 2-core machine, the ratio, and the plan's search status,
gap (issue 14: at most 1 %) and predicted step time. Then, for ``--time-limit`` 1, 2 and 5 s on each
headline case, the search's own wall time (``search.wall_time_s``) as a ratio of the limit (issue 3:
within 10 %) and the plan it returned. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import resource
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
MIXED = [
    ("DeepSeek-V3, 2,048 H100", "deepseek-v3", "dgx-h100", 2048, 15360, 4096, 30.0),
    ("alternating dense/MoE 12 blocks, 8 H100", "alternating-moe-12", "dgx-h100", 8, 64, 4096, 30.0),
]
BUILT = {"alternating-moe-12"}
"""Models ``bench/mixed_models.py`` builds (the rest are presets)."""
GAP_TARGET = 0.01


TIME_LIMITS = (1.0, 2.0, 5.0)


def run_case(model: str, cluster: str, gpus: int, batch: int, seq: int, target: str, out: Path,
             *extra: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(wall seconds, finished process) of one ``meshplan plan`` run (``bench/mixed_models.py`` for
    the models it builds); the process's CPU seconds go to :data:`CPU_S`."""
    if model in BUILT:
        argv = [sys.executable, str(REPO / "bench" / "mixed_models.py"), model, cluster, str(gpus), str(batch), str(seq), str(out), target]
    else:
        argv = [sys.executable, str(REPO / "cli.py"), "plan", "--model", model, "--cluster", cluster, "--gpus", str(gpus),
                "--global-batch", str(batch), "--seq-len", str(seq), "--target", target, "-o", str(out), "--timing", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, proc


CPU_S = [0.0]
"""CPU seconds of the last :func:`run_case` process."""


def measure(case: tuple, target: str, tmp: Path) -> dict:
    """One case planned as a user plans it: wall and CPU seconds, exit code, and from the plan its
    search status, gap, step time and candidates evaluated (None where the run failed)."""
    _, model, cluster, gpus, batch, seq, _ = case
    out = tmp / "plan.json"
    wall, proc = run_case(model, cluster, gpus, batch, seq, target, out)
    row = {"wall_s": wall, "cpu_s": CPU_S[0], "exit": proc.returncode, "status": None, "gap": None, "step_s": None, "evaluated": None,
           "error": proc.stderr.strip().splitlines()[-1] if proc.returncode and proc.stderr.strip() else ""}
    if proc.returncode == 0:
        plan = json.loads(out.read_text())
        s = plan["search"]
        row.update(status=s["status"], gap=s["optimality_gap"], step_s=plan["estimate"]["step_time_s"], evaluated=s["candidates_evaluated"])
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="native", choices=("native", "megatron", "torchtitan", "deepspeed"))
    parser.add_argument("--only", type=int, help="run only case N (1-4 headline, 5 DeepSeek-V3, 6 alternating)")
    parser.add_argument("--no-limits", action="store_true", help="skip the --time-limit runs")
    args = parser.parse_args(argv[1:])
    everything = CASES + MIXED
    cases = [everything[args.only - 1]] if args.only else everything
    print(f"{'case':<40} {'wall s':>7} {'cpu s':>6} {'target s':>8} {'ratio':>6}  result")
    worst, gaps = 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            label, target_s = case[0], case[-1]
            row = measure(case, args.target, Path(tmp))
            wall = row["wall_s"]
            worst = max(worst, wall / target_s)
            gaps.append(row["gap"] if row["gap"] is not None else float("inf"))
            if row["exit"] == 0:
                result = f"{row['status']}, gap {row['gap']:.2%}, step {row['step_s']:.3f} s, {row['evaluated']:,} evaluated"
            else:
                result = f"exit {row['exit']}: {row['error']}"
            print(f"{label:<40} {wall:>7.2f} {row['cpu_s']:>6.2f} {target_s:>8.0f} {wall / target_s:>6.2f}  {result}", flush=True)
    print(f"worst ratio to target: {worst:.2f} ({'within' if worst <= 1 else 'over'} the targets); "
          f"gap <= {GAP_TARGET:.0%} in {sum(g <= GAP_TARGET for g in gaps)} of {len(gaps)} cases")
    cases = [c for c in cases if c in CASES]
    if not args.no_limits and cases:
        time_limits(cases, args.target)
    return 0


def time_limits(cases: list, target: str) -> None:
    """Search wall time under each of :data:`TIME_LIMITS`, as a ratio of the limit."""
    print(f"\n{'case':<40} {'limit s':>7} {'search s':>8} {'ratio':>6}  result")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for label, model, cluster, gpus, batch, seq, _ in cases:
            for limit in TIME_LIMITS:
                _, proc = run_case(model, cluster, gpus, batch, seq, target, Path(tmp) / "plan.json", "--time-limit", str(limit))
                if proc.returncode != 0:
                    print(f"{label:<40} {limit:>7.0f} exit {proc.returncode}")
                    continue
                plan = json.loads((Path(tmp) / "plan.json").read_text())
                s = plan["search"]
                worst = max(worst, s["wall_time_s"] / limit)
                print(f"{label:<40} {limit:>7.0f} {s['wall_time_s']:>8.2f} {s['wall_time_s'] / limit:>6.2f}  "
                      f"{s['status']}, gap {s['optimality_gap']:.2%}, step {plan['estimate']['step_time_s']:.3f} s", flush=True)
    print(f"worst search time / limit: {worst:.2f} ({'within' if worst <= 1.1 else 'over'} 1.10)")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
