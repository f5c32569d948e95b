"""Estimates per second on the hot path the search calls (``costmodel.step.estimate_step``).

Usage: python bench/estimate_speed.py [seconds]
Prints estimates/s for three configurations (cold layer-cost memo excluded: the search reuses one
cost table per model and cluster) and the ratio to the 10,000/s-per-core target of issue 2. Run it
on an idle machine: the figure is per process, i.e. per core.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.specs import ParallelConfig  # noqa: E402
from costmodel.step import estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg  # noqa: E402

TARGET_PER_S = 10_000
CASES = [
    ("gpt3-175b", "dgx-a100", dict(tp=8, pp=16, dp=8, sp=True, zero=1, global_batch=1536, seq_len=2048)),
    ("llama3.1-405b", "dgx-h100", dict(tp=8, pp=16, dp=128, sp=True, zero=1, vpp=2, schedule="interleaved-1f1b", global_batch=2048, seq_len=8192)),
    ("mixtral-8x7b", "dgx-h100", dict(tp=1, pp=1, dp=256, ep=8, zero=2, micro_batch=2, global_batch=1024, seq_len=4096, recompute="full")),
]


def rate(table, cfg: ParallelConfig, seconds: float) -> float:
    estimate_step(table, cfg)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            estimate_step(table, cfg)
        n += 100
    return n / (time.perf_counter() - start)


def main(argv: list[str]) -> int:
    seconds = float(argv[1]) if len(argv) > 1 else 2.0
    rates = []
    for model, cluster, settings in CASES:
        table = build_cost_table(resolve_model_arg(model), resolve_cluster_arg(cluster))
        r = rate(table, ParallelConfig(**settings), seconds)
        rates.append(r)
        print(f"{model:<16} {cluster:<9} {r:>9,.0f} estimates/s  ({r / TARGET_PER_S:.2f}x the {TARGET_PER_S:,}/s target)")
    worst = min(rates)
    print(f"slowest case: {worst:,.0f}/s = {worst / TARGET_PER_S:.2f}x target; {1e6 / worst:.0f} us per estimate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
