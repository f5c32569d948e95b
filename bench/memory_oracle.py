"""The memory oracle: per-rank peak memory predicted by the cost model vs measured by torch.

For every case of ``planner.runtime.memcheck.cases.CASES`` (real-size models under FSDP / ZeRO,
TP + SP, pipelines and the recompute modes) this runs ``meshplan check-memory``'s measurement
(torch's FSDPMemTracker on fake tensors over a fake process group of the plan's world size) and
prints, per pipeline-rank kind, the measured and predicted peak (GiB) of allocated tensors, the
error, the acceptance verdict (within 10 % and never under by more than 3 %), then the GPU-only
terms torch's tracker cannot see (runtime overhead: CUDA context, NCCL; the caching allocator's
slack and cache) and the cost model's full per-GPU figure.

``--planned`` measures the plans the search itself picks (``cases.PLANNED``: issue 21's two
reproductions, ZeRO 2 and 3, a pipeline with several micro-batches in flight, TP + SP under PP)
instead, and prints under each case the plan's own ``peak_memory_gib`` against its largest rank's
measurement plus that rank's GPU-only terms (the issue's acceptance band).

The last lines give the distribution of the error over every measured rank kind, per kind (whole
model, first, middle, last pipeline stage): min / median / max, the worst over and the worst under
(``planner.runtime.memcheck.spread``).

``--cp`` measures the planner-chosen context-parallel plans (``cases.CONTEXT_PARALLEL``: a 1.1B
Llama with grouped K/V, Llama 3.2 3B and Llama 3.1 8B at 32K-131K tokens, issue 34) the same way.

Run: ``python bench/memory_oracle.py [--planned | --cp] [--full-depth] [--categories] [CASE ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time

TOLERANCE, UNDER = 0.10, 0.03


def _plan_row(plan: object, result: object) -> bool:
    """Print the plan's own ``peak_memory_gib`` against the largest measured rank plus its GPU-only
    terms (the issue's acceptance); True when within the band."""
    m, s = plan.mesh, plan.schedule  # type: ignore[attr-defined]
    checked = max(r.measured_peak_gib + sum(r.gpu_only_gib.values()) for r in result.ranks)  # type: ignore[attr-defined]
    figure = plan.estimate.peak_memory_gib  # type: ignore[attr-defined]
    error = figure / checked - 1
    ok = -UNDER <= error <= TOLERANCE
    print(f"{'':36} plan dp {m.dp} tp {m.tp} pp {m.pp} sp {m.sp} zero {m.zero} {s.name} v{s.virtual_stages} "
          f"mb {s.micro_batch} x {s.num_microbatches}: plan {figure:.2f} GiB vs measured + GPU-only {checked:.2f} GiB "
          f"{error:+.1%} {'ok' if ok else 'FAIL'}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    from planner.noise import silence_third_party

    silence_third_party()  # FSDP2's per-step advice on fake tensors, as check-memory silences it
    from planner.runtime.memcheck.check import check_memory
    from planner.runtime.memcheck.cases import CASES, CONTEXT_PARALLEL, PLANNED, case_model, case_plan
    from planner.runtime.memcheck.spread import Checked, spread_lines

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--full-depth", action="store_true", help="measure every block instead of extrapolating")
    parser.add_argument("--categories", action="store_true", help="also print each rank's measured and predicted categories")
    parser.add_argument("--planned", action="store_true", help="the planner-chosen cases (cases.PLANNED) instead")
    parser.add_argument("--cp", action="store_true", help="the planner-chosen context-parallel cases (cases.CONTEXT_PARALLEL) instead")
    args = parser.parse_args(argv)
    pool = CONTEXT_PARALLEL if args.cp else PLANNED if args.planned else CASES
    chosen = [c for c in pool if not args.cases or c.name in args.cases]
    print(f"{'case':36} {'rank':>4} {'measured':>9} {'predicted':>9} {'error':>7}  verdict  {'GPU-only':>8} {'per GPU':>8} seconds")
    errors, failed, checked = [], 0, []
    for case in chosen:
        start = time.perf_counter()
        try:
            plan = case_plan(case)
            result = check_memory(plan, model=case_model(case), full_depth=args.full_depth)
        except Exception as exc:  # a case the runtime cannot run is a row of the table, not the end of it
            failed += 1
            print(f"{case.name:36} {'-':>4} {'':9} {'':9} {'':7}  ERROR   {type(exc).__name__}: {' '.join(str(exc).split())[:90]}")
            continue
        for row in result.ranks:
            ok = abs(row.error) <= TOLERANCE and row.error >= -UNDER
            failed += not ok
            errors.append(abs(row.error))
            checked.append(Checked(case.name, row.pp_rank, plan.mesh.pp, row.measured_peak_gib, row.predicted_peak_gib))
            print(f"{case.name:36} {row.pp_rank:>4} {row.measured_peak_gib:9.2f} {row.predicted_peak_gib:9.2f} "
                  f"{row.error:+7.1%}  {'ok' if ok else 'FAIL':7} {sum(row.gpu_only_gib.values()):8.2f} "
                  f"{row.predicted_gpu_peak_gib:8.2f} {row.seconds:7.1f}", flush=True)
            if args.categories:
                for label, parts in (("measured", row.measured_gib), ("predicted", row.predicted_gib), ("GPU-only", row.gpu_only_gib)):
                    print(f"{'':41} {label:9} " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
        if args.planned or args.cp:
            failed += not _plan_row(plan, result)
        print(f"{'':36} {'':4} total {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if errors:
        print(f"{len(errors)} rank kinds: mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}, "
              f"{failed} outside (within 10 %, under by at most 3 %)")
    print("check-memory error (predicted / measured - 1) by rank kind:")
    for line in spread_lines(checked):
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
