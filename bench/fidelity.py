"""Compare predicted step times (and peak memory where published) with every comparable published
run (planner/reference/published_runs.csv), each row with its engine and precision.

Usage: python bench/fidelity.py [path/to/published_runs.csv]
Prints per-row predicted vs measured step time and the error (and, for rows that publish the
allocator's reserved peak, predicted vs measured reserved peak memory), then per source and overall: rows, mean
absolute error, max absolute error and mean signed error (the bias: + means predicted too slow).
Assumptions for unstated settings are printed once (planner.reference.published).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.step import StepEstimate, estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.reference.published import ASSUMPTIONS, PUBLISHED_RUNS_CSV, PublishedRun, load_runs  # noqa: E402

DEFAULT_CSV = PUBLISHED_RUNS_CSV


def estimates(runs: list[PublishedRun]) -> list[StepEstimate]:
    """The cost model's estimate of every run."""
    return [estimate_step(build_cost_table(r.model, r.cluster), r.config) for r in runs]


def reserved_peak_gib(est: StepEstimate) -> float:
    """What PyTorch's caching allocator reports as its reserved peak (``torch.cuda.memory_stats()``
    ``reserved_bytes.all.peak``, torchtitan's ``memory:`` log line, components/metrics.py): the
    per-GPU peak less the cluster's ``runtime_overhead_gib`` (CUDA context, NCCL communicators and
    their buffers), which the runtime allocates outside the caching allocator."""
    return est.peak_memory_gib - est.table.cluster.runtime_overhead_gib


def summarise(errors: dict[str, list[float]]) -> list[tuple[str, int, float, float, float]]:
    """(source, rows, mean |error|, max |error|, mean signed error) per source, then 'overall'."""
    rows = []
    everything = [e for errs in errors.values() for e in errs]
    for source, errs in sorted(errors.items()) + [("overall", everything)]:
        absolute = [abs(e) for e in errs]
        rows.append((source, len(errs), sum(absolute) / len(errs), max(absolute), sum(errs) / len(errs)))
    return rows


def _config(run: PublishedRun) -> str:
    c = run.config
    extra = "".join([f" {c.engine}", " fp8" if c.precision == "fp8" else "", " compiled" if c.compile else ""])
    return f"t{c.tp} p{c.pp} d{c.dp} c{c.cp} v{c.vpp} b{c.micro_batch} z{c.zero}{extra}"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV
    runs, skipped = load_runs(path)
    errors: dict[str, list[float]] = {}
    memory: list[tuple[str, float, float]] = []
    print(f"{'row':<48} {'cfg':<44} {'measured s':>10} {'predicted s':>11} {'error':>7}")
    for run, est in zip(runs, estimates(runs)):
        err = est.step_time_s / run.measured_step_s - 1
        errors.setdefault(run.source, []).append(err)
        fit = "" if est.fits else f"  (over memory by {est.over_by_gib:.1f} GiB)"
        print(f"{run.label[:48]:<48} {_config(run):<44} {run.measured_step_s:>10.3f} {est.step_time_s:>11.3f} {err:>+7.1%}{fit}")
        if run.measured_peak_memory_gib is not None:
            memory.append((run.label, run.measured_peak_memory_gib, reserved_peak_gib(est)))
    for label, why in skipped:
        print(f"{label[:48]:<48} skipped: {why}")
    print()
    for source, n, mean, worst, bias in summarise(errors):
        print(f"{source:<10} rows {n:>3}  mean |error| {mean:6.1%}  max {worst:6.1%}  bias {bias:+6.1%}")
    print(f"compared {len(runs)} of {len(runs) + len(skipped)} rows")
    if memory:
        print("\npeak memory per GPU (allocator's reserved peak where published; predicted: the per-GPU peak less the runtime overhead outside the allocator):")
        for label, measured, predicted in memory:
            print(f"  {label[:48]:<48} measured {measured:6.1f} GiB  predicted {predicted:6.1f} GiB  {predicted / measured - 1:+6.1%}")
        errs = [p / m - 1 for _, m, p in memory]
        print(f"  memory rows {len(errs)}  mean |error| {sum(map(abs, errs)) / len(errs):.1%}  max {max(map(abs, errs)):.1%}  "
              f"largest under-prediction {min(0.0, min(errs)):+.1%}")
    print("\nassumptions:")
    for source, text in ASSUMPTIONS.items():
        print(f"  {source}: {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
