"""Fit the few global efficiency knobs of the cost model on the shared published runs.

Usage: python bench/calibrate.py [path/to/published_runs.csv]
Knobs (applied to every GPU alike, so that GPUs without published runs inherit the physics, not
row fits): the fraction of each GPU's measured GEMM ceiling (MAMF) reached in training loops, the
GEMM half-efficiency size, FlashAttention efficiency relative to GEMMs, the HBM efficiency, and the
compute slowdown under overlapped communication. Coordinate descent on the mean absolute log error
plus its maximum; prints the fitted values and the resulting errors. The values are then written to
profiles/gpus.json and profiles/clusters.json by hand, citing this script.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.step import estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.published import load_runs  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "reference" / "published_runs.csv"
MAMF = {"a100": 0.869, "h100": 0.803}
"""Maximum Achievable Matmul FLOPS / peak (stas00/ml-engineering compute/accelerator/README.md)."""
LATENCY_US = {"ll128": (1.9, 4.0), "simple": (3.4, 14.0)}
"""NCCL per-hop ring latency (intra-node, network) by protocol (NVIDIA/nccl src/graph/tuning.cc)."""
WEIGHT_MAX = float(__import__("os").environ.get("CAL_WEIGHT_MAX", "0.5"))
"""Weight of the largest error against the mean in the objective."""
GRID = {
    "mamf_scale": [0.70, 0.75, 0.78, 0.81, 0.84, 0.87, 0.90, 0.94, 1.0],
    "gemm_half_gflop": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
    "attention_ratio": [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    "memory": [0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "overlap_slowdown": [0.0, 0.1, 0.2, 0.3],
    "network": [0.7, 0.8, 0.9],
    "latency": ["ll128", "simple"],
    "v100_gemm": [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8],
}
GRID["mamf_scale"] += [0.65, 0.6]
GRID["gemm_half_gflop"] = [0.05, 0.1] + GRID["gemm_half_gflop"]
GRID["attention_ratio"] = [0.25, 0.3, 0.35] + GRID["attention_ratio"]


def errors(runs, knobs: dict[str, float]) -> list[float]:
    out = []
    for run in runs:
        cl = run.cluster
        family = next((k for k in MAMF if k in cl.gpu.name), None)
        gemm = MAMF[family] * knobs["mamf_scale"] if family else knobs["v100_gemm"]
        eff = cl.efficiency.model_copy(update={
            "gemm_max": min(1.0, gemm), "gemm_half_gflop": knobs["gemm_half_gflop"],
            "attention": min(1.0, gemm * knobs["attention_ratio"]), "memory": knobs["memory"],
            "overlap_slowdown": knobs["overlap_slowdown"], "network": knobs["network"],
        })
        intra, inter = LATENCY_US[knobs["latency"]]
        cluster = cl.model_copy(update={"efficiency": eff, "intra_node_latency_us": intra, "network_latency_us": inter})
        est = estimate_step(build_cost_table(run.model, cluster), run.config)
        out.append(math.log(est.step_time_s / run.measured_step_s))
    return out


def score(errs: list[float]) -> float:
    absolute = [abs(e) for e in errs]
    return sum(absolute) / len(absolute) + WEIGHT_MAX * max(absolute)


def main(argv: list[str]) -> int:
    runs, _ = load_runs(Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV)
    knobs = {k: v[len(v) // 2] for k, v in GRID.items()}
    best = score(errors(runs, knobs))
    for _ in range(4):
        for key, values in GRID.items():
            for value in values:
                trial = dict(knobs, **{key: value})
                s = score(errors(runs, trial))
                if s < best - 1e-9:
                    best, knobs = s, trial
    errs = [math.exp(e) - 1 for e in errors(runs, knobs)]
    print("fitted:", knobs)
    print(f"mean |error| {sum(map(abs, errs)) / len(errs):.1%}  max {max(map(abs, errs)):.1%}  rows {len(errs)}")
    for run, e in zip(runs, errs):
        print(f"  {run.label[:50]:<50} {e:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
