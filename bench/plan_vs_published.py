"""The plan against every comparable published configuration, under the same cost model.

Usage: python bench/plan_vs_published.py [path/to/published_runs.csv] [--target megatron] [--time-limit SEC]
For each run of ``planner.reference.published.load_runs``, plan the same model, GPU count, global batch and
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
from planner.plans.build import build_plan, summary  # noqa: E402
from planner.reference.published import PUBLISHED_RUNS_CSV, load_runs  # noqa: E402
from planner.plans.plan_checks import plan_problems  # noqa: E402
from search.core import search_plan  # noqa: E402
from search.types import SearchRequest  # noqa: E402

DEFAULT_CSV = PUBLISHED_RUNS_CSV
EXPERT_CONFIGS = [
    # (label, model, cluster, configuration as experts publish it); compared only, never fitted to.
    ("Llama 3.1 405B, Llama 3 paper layout", "llama3.1-405b", "dgx-h100",
     dict(tp=8, pp=16, dp=128, sp=True, zero=1, tp_comm_overlap=True, global_batch=2048, seq_len=8192)),
    ("GPT-3 175B, Megatron-LM example script", "gpt3-175b", "dgx-a100",
     dict(tp=8, pp=16, dp=8, sp=True, zero=1, global_batch=1536, seq_len=2048)),
    ("Llama 3.1 70B, torchtitan TP8 + FSDP", "llama3.1-70b", "dgx-h100",
     dict(tp=8, dp=8, sp=True, zero=3, recompute="full", micro_batch=2, global_batch=512, seq_len=8192)),
    ("Mixtral 8x7B, EP8 + distributed optimizer", "mixtral-8x7b", "dgx-h100",
     dict(tp=1, dp=256, ep=8, zero=1, recompute="full", global_batch=1024, seq_len=4096)),
]


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
    worse += _expert_configs(args.target, args.time_limit)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    print(f"\n{len(ratios)} runs planned ({len(skipped)} rows skipped: no published configuration or throughput); "
          f"geometric mean ratio {geo:.3f}; worst {max(ratios, default=float('nan')):.3f}")
    print(f"plan slower than the published configuration (or none fits): {len(worse)}" + "".join(f"\n  {x}" for x in worse))
    print(f"plans failing validation: {len(invalid)}" + "".join(f"\n  {x}" for x in invalid))
    return 0


def _expert_configs(target: str, time_limit: float | None) -> list[str]:
    """The same comparison for well-known expert configurations that are not in the shared file."""
    from costmodel.specs import ParallelConfig
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

    print("\nexpert configurations (not in the shared file):")
    worse = []
    for label, model_name, cluster_name, settings in EXPERT_CONFIGS:
        model, cluster = resolve_model_arg(model_name), resolve_cluster_arg(cluster_name)
        cfg = ParallelConfig(**settings)
        expert = estimate_step(build_cost_table(model, cluster), cfg)
        req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=target, time_limit_s=time_limit)  # type: ignore[arg-type]
        best = search_plan(model, cluster, req).best
        ratio = best.step_time_s / expert.step_time_s if best else float("inf")
        fits = "" if expert.fits else " (expert config over memory in the model)"
        print(f"  {label:<44} expert {expert.step_time_s:8.3f} s  plan {best.step_time_s if best else float('nan'):8.3f} s  ratio {ratio:.3f}{fits}")
        if ratio > 1 + 1e-9:
            worse.append(label)
    return worse


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
