"""Compare predicted step times with every comparable published run (planner/reference/published_runs.csv).

Usage: python bench/fidelity.py [path/to/published_runs.csv]
Prints per-row predicted vs measured step time and the error, then mean and max absolute error per
source and overall. Assumptions for unstated settings are printed once (planner.published).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.step import estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.published import ASSUMPTIONS, PUBLISHED_RUNS_CSV, load_runs  # noqa: E402

DEFAULT_CSV = PUBLISHED_RUNS_CSV


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV
    runs, skipped = load_runs(path)
    errors: dict[str, list[float]] = {}
    print(f"{'row':<48} {'cfg':<22} {'measured s':>10} {'predicted s':>11} {'error':>7}")
    for run in runs:
        est = estimate_step(build_cost_table(run.model, run.cluster), run.config)
        err = est.step_time_s / run.measured_step_s - 1
        errors.setdefault(run.source, []).append(abs(err))
        c = run.config
        cfg = f"t{c.tp} p{c.pp} d{c.dp} v{c.vpp} b{c.micro_batch} z{c.zero}"
        fit = "" if est.fits else f"  (over memory by {est.over_by_gib:.1f} GiB)"
        print(f"{run.label[:48]:<48} {cfg:<22} {run.measured_step_s:>10.3f} {est.step_time_s:>11.3f} {err:>+7.1%}{fit}")
    for label, why in skipped:
        print(f"{label[:48]:<48} skipped: {why}")
    print()
    everything = [e for errs in errors.values() for e in errs]
    for source, errs in sorted(errors.items()):
        print(f"{source:<10} rows {len(errs):>3}  mean |error| {sum(errs) / len(errs):6.1%}  max {max(errs):6.1%}")
    print(f"{'overall':<10} rows {len(everything):>3}  mean |error| {sum(everything) / len(everything):6.1%}  max {max(everything):6.1%}")
    print(f"compared {len(everything)} of {len(everything) + len(skipped)} rows")
    print("\nassumptions:")
    for source, text in ASSUMPTIONS.items():
        print(f"  {source}: {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
