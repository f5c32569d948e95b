"""The plan against every comparable published configuration, under the same cost model.

Usage: python bench/plan_vs_published.py [path/to/published_runs.csv] [--target megatron] [--time-limit SEC]
For each run of ``planner.published.load_runs``, plan the same model, GPU count, global batch and
sequence length on that row's cluster with ``--target megatron`` (issue 3 acceptance), validate the
plan, and print predicted plan step time / predicted step time of the published configuration. The
plan must be at most 1.0 everywhere; the geometric mean summarises the gain. A published
configuration that does not fit in memory under the cost model is marked (the plan must still fit).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.step import estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.plans import build_plan, summary  # noqa: E402
from planner.published import load_runs  # noqa: E402
from planner.validate import plan_problems  # noqa: E402
from search.core import search_plan  # noqa: E402
from search.types import SearchRequest  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "reference" / "published_runs.csv"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--target", default="megatron", choices=("native", "megatron", "torchtitan", "deepspeed"))
    parser.add_argument("--time-limit", type=float, default=None, help="per-plan search time limit, seconds")
    args = parser.parse_args(argv[1:])
    runs, skipped = load_runs(args.csv)
    print(f"{'row':<44} {'published cfg':<30} {'pub s':>8} {'plan s':>8} {'ratio':>6} {'search s':>8}  plan")
    ratios, worse, invalid = [], [], []
    for run in runs:
        cfg = run.config
        table = build_cost_table(run.model, run.cluster)
        published = estimate_step(table, cfg)
        req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=args.target,
                            time_limit_s=args.time_limit)  # type: ignore[arg-type]
        start = time.perf_counter()
        result = search_plan(run.model, run.cluster, req)
        took = time.perf_counter() - start
        shape = f"tp{cfg.tp} pp{cfg.pp} dp{cfg.dp} v{cfg.vpp} z{cfg.zero} {cfg.recompute}" + ("" if published.fits else " (OOM)")
        if result.best is None:
            print(f"{run.label:<44} {shape:<30} {published.step_time_s:>8.3f} {'-':>8} {'-':>6} {took:>8.1f}  no plan fits")
            worse.append(run.label)
            continue
        plan = build_plan(run.model, run.model, run.cluster, req, result, timing=False)
        problems = plan_problems(plan, run.model)
        if problems:
            invalid.append(f"{run.label}: {problems[0]}")
        ratio = result.best.step_time_s / published.step_time_s
        ratios.append(ratio)
        if ratio > 1 + 1e-9:
            worse.append(run.label)
        print(f"{run.label:<44} {shape:<30} {published.step_time_s:>8.3f} {result.best.step_time_s:>8.3f} {ratio:>6.3f} "
              f"{took:>8.1f}  {summary(result.best.config)}", flush=True)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    print(f"\n{len(ratios)} runs planned ({len(skipped)} rows skipped: no published configuration or throughput); "
          f"geometric mean ratio {geo:.3f}; worst {max(ratios, default=float('nan')):.3f}")
    print(f"plan slower than the published configuration (or none fits): {len(worse)}" + "".join(f"\n  {x}" for x in worse))
    print(f"plans failing validation: {len(invalid)}" + "".join(f"\n  {x}" for x in invalid))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
