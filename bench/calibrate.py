"""Fit the few global efficiency knobs of the cost model on the shared published runs.

Usage: python bench/calibrate.py [path/to/published_runs.csv]
Environment: CAL_WEIGHT_MAX (default 0.5) weights the largest error against the mean in the objective.

Every knob is the same for every GPU, so that GPUs without published runs inherit the physics, not
row fits. Per GPU the model only uses *measured kernel ceilings* from public benchmarks (the tables
below); the knobs say how much of them a training loop gets:

- ``loop``: fraction of a GPU's measured kernel ceilings reached inside a training loop (clocks under
  sustained load, real shapes, concurrent kernels): ``gemm_max = MAMF x loop`` and
  ``attention = FlashAttention ceiling x loop``;
- ``gemm_fixed_us``: fixed time a GEMM kernel costs beyond its FLOPs at the ceiling (ramp-up, tail,
  epilogue); a time, so each GPU's ``gemm_half_gflop`` (``costmodel.kernels``) is this time at that
  GPU's GEMM rate: ``gemm_fixed_us x peak x gemm_max``;
- ``memory``: achieved fraction of HBM bandwidth in memory-bound kernels;
- ``overlap_slowdown``: compute slowdown while a collective runs concurrently;
- ``step_fixed_s``: fixed host-side time per step (``costmodel.step.STEP_FIXED_S``);
- ``straggler_s``: mean per-node delay per step, which synchronous training pays as the expected
  delay of the slowest of N nodes (``costmodel.step.STRAGGLER_DELAY_S``).

A coarse exhaustive search, then coordinate descent, on the mean absolute error plus
CAL_WEIGHT_MAX times its maximum; prints the
fitted knobs, the resulting errors and the efficiencies to write into profiles/gpus.json and
profiles/clusters.json (by hand, citing this script). Never fit on runs outside the shared file.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.specs import ClusterSpec  # noqa: E402
from costmodel.step import STEP_FIXED_S, estimate_step, straggler_time  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.reference.published import PUBLISHED_RUNS_CSV, PublishedRun, load_runs  # noqa: E402
from profiles import list_gpus  # noqa: E402

DEFAULT_CSV = PUBLISHED_RUNS_CSV
MAMF: dict[str, float] = {
    "v100-sxm2-32gb": 0.803,
    "a100-40gb": 271.2 / 312,
    "a100-80gb": 271.2 / 312,
    "h100-sxm": 794.5 / 989,
    "h100-96gb-hbm2e": 794.5 / 989,
    "h200": 794.5 / 989,
    "h800": 794.5 / 989,
    "b200": 1745.0 / 2250,
    "gb200": 1822.0 / 2500,
    "mi300x": 668.4 / 1307.4,
    "mi325x": 784.9 / 1307.4,
}
"""Maximum Achievable Matmul FLOPS / dense peak (stas00/ml-engineering compute/accelerator/README.md,
costmodel-notes 3.2). V100 has no measurement there: H100's 0.803 is assumed (its runs use eager
attention, so the assumption only sets the V100 GEMM ceiling)."""
FLASH: dict[str, float] = {
    "v100-sxm2-32gb": 0.60 * 0.803,
    "a100-40gb": 0.50,
    "a100-80gb": 0.50,
    "h100-sxm": 484 / 989,
    "h100-96gb-hbm2e": 484 / 989,
    "h200": 484 / 989,
    "h800": 484 / 989,
    "b200": 484 / 989 * (1745.0 / 2250) / (794.5 / 989),
    "gb200": 484 / 989 * (1822.0 / 2500) / (794.5 / 989),
    "mi300x": 484 / 989 * (668.4 / 1307.4) / (794.5 / 989),
    "mi325x": 484 / 989 * (784.9 / 1307.4) / (794.5 / 989),
}
"""FlashAttention ceiling / dense peak, head dim 128, causal. A100: FlashAttention-2 reaches 50-73 %
of peak (Dao, "FlashAttention-2", ICLR 2024, abstract), causal at 2k tokens the low end. H100:
Hopper kernels (cuDNN through Transformer Engine, as Megatron-Core uses; FlashAttention-3 is alike)
reach 484 TFLOP/s forward at 2k tokens (Shah et al., "FlashAttention-3", 2024, Fig. 'Attention
forward speed, head dim 128, H100 SXM5'; FlashAttention-2 reaches 298 there). Other GPUs have no
measurement in the notes: H100's fraction scaled by their MAMF relative to H100's [assumption];
V100 runs eager attention (FlashAttention-2 does not support Volta)."""
GRID: dict[str, list[float]] = {
    "loop": [round(0.70 + 0.005 * i, 3) for i in range(41)],
    "gemm_fixed_us": [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0],
    "memory": [0.6, 0.7, 0.75, 0.8, 0.85, 0.9],
    "overlap_slowdown": [0.1, 0.15, 0.2, 0.25, 0.3],
    "step_fixed_s": [round(0.01 * i, 2) for i in range(31)],
    "straggler_s": [round(0.005 * i, 3) for i in range(17)],
}
START = {"loop": 0.80, "gemm_fixed_us": 4.0, "memory": 0.85, "overlap_slowdown": 0.15, "step_fixed_s": 0.1, "straggler_s": 0.0}
FIT = [k for k in os.environ.get("CAL_KNOBS", "loop,step_fixed_s,straggler_s").split(",") if k]
"""Knobs to fit (CAL_KNOBS); the others keep their START values, which are sourced (see profiles)."""
WEIGHT_MAX = float(os.environ.get("CAL_WEIGHT_MAX", "0.5"))
"""Weight of the largest error against the mean in the objective."""


def gpu_key(cluster: ClusterSpec) -> str:
    """The profiles name of a cluster's GPU (a key of :data:`MAMF`)."""
    return cluster.gpu.name


def with_knobs(cluster: ClusterSpec, knobs: dict[str, float]) -> ClusterSpec:
    """``cluster`` with its efficiencies replaced by the knobs' values."""
    gpu = gpu_key(cluster)
    gemm = min(1.0, MAMF[gpu] * knobs["loop"])
    eff = cluster.efficiency.model_copy(update={
        "gemm_max": gemm,
        "attention": min(1.0, FLASH[gpu] * knobs["loop"]),
        "gemm_half_gflop": half_gflop(cluster.gpu.peak_bf16_tflops, gemm, knobs["gemm_fixed_us"]),
        "memory": knobs["memory"],
        "overlap_slowdown": knobs["overlap_slowdown"],
    })
    return cluster.model_copy(update={"efficiency": eff})


def half_gflop(peak_tflops: float, gemm_max: float, fixed_us: float) -> float:
    """GEMM size (GFLOP) whose ideal time equals the fixed time: F½ = t0 · peak · gemm_max."""
    return fixed_us * 1e-6 * peak_tflops * 1e12 * gemm_max / 1e9


ADDITIVE = ("step_fixed_s", "straggler_s")
"""Knobs that add to a computed estimate without changing it (swapped in after estimating)."""


def errors(runs: list[PublishedRun], knobs: dict[str, float], cache: dict | None = None) -> list[float]:
    """predicted / measured − 1 of every run (what bench/fidelity.py reports); the step's fixed cost
    and the straggler term are swapped for the knobs'. ``cache`` keeps the estimates of the other
    knobs' values, so sweeping the additive knobs costs no re-estimation."""
    key = tuple(sorted((k, v) for k, v in knobs.items() if k not in ADDITIVE))
    if cache is None or key not in cache:
        ests = [estimate_step(build_cost_table(run.model, with_knobs(run.cluster, knobs)), run.config) for run in runs]
        if cache is None:
            cache = {}
        cache[key] = ests
    out = []
    for run, est in zip(runs, cache[key]):
        gpn, n = run.cluster.gpus_per_node, run.config.num_gpus
        jitter = straggler_time(n, gpn, knobs["straggler_s"]) - straggler_time(n, gpn)
        predicted = est.step_time_s - est.table.cluster.efficiency.step_fixed_s + knobs["step_fixed_s"] + jitter
        out.append(predicted / run.measured_step_s - 1.0)
    return out


def score(errs: list[float]) -> float:
    """Mean absolute error plus WEIGHT_MAX times the largest."""
    absolute = [abs(e) for e in errs]
    return sum(absolute) / len(absolute) + WEIGHT_MAX * max(absolute)


def fit(runs: list[PublishedRun], sweeps: int = 6) -> dict[str, float]:
    """Every combination of every other grid value of the fitted knobs (a coarse exhaustive search,
    so coordinate descent cannot stall in a valley), then coordinate descent over the full grids
    until a sweep changes nothing."""
    coarse = [GRID[key][::2] for key in FIT]
    knobs, best, cache = dict(START), math.inf, {}
    for values in itertools.product(*coarse):
        trial = dict(START, **dict(zip(FIT, values)))
        s = score(errors(runs, trial, cache))
        if s < best:
            best, knobs = s, trial
    for _ in range(sweeps):
        changed = False
        for key in FIT:
            for value in GRID[key]:
                trial = dict(knobs, **{key: value})
                s = score(errors(runs, trial, cache))
                if s < best - 1e-9:
                    best, knobs, changed = s, trial, True
        if not changed:
            break
    return knobs


def main(argv: list[str]) -> int:
    runs, _ = load_runs(Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV)
    knobs = fit(runs)
    errs = errors(runs, knobs)
    print("fitted:", {k: round(v, 4) for k, v in knobs.items()})
    print(f"mean |error| {sum(map(abs, errs)) / len(errs):.1%}  max {max(map(abs, errs)):.1%}  rows {len(errs)}")
    for run, e in zip(runs, errs):
        print(f"  {run.label[:50]:<50} {e:+.1%}")
    print("profiles/gpus.json efficiencies (gemm_max = MAMF x loop, attention = FlashAttention x loop):")
    for gpu in list_gpus():
        gemm = MAMF[gpu.name] * knobs["loop"]
        half = half_gflop(gpu.peak_bf16_tflops, gemm, knobs["gemm_fixed_us"])
        print(f"  {gpu.name:<16} gemm_max {gemm:.3f}  attention {FLASH[gpu.name] * knobs['loop']:.3f}  gemm_half_gflop {half:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
