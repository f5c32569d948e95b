"""``meshplan sweep``: the best plan for every point of a grid, and what training costs with each.

Prints one table row per point (or the sweep JSON with ``--json``); ``-o`` writes the JSON or, for a
``.csv`` name, one row per point; ``--report`` writes the HTML page and, in ``<stem>_plans/`` beside
it, every point's plan JSON and plan report. Files are written atomically and only when the sweep
succeeds: a bad grid exits 2 and a deadline that no point meets exits 3 (with the closest point),
both writing nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from planner.cli._common import EXIT_OK, UsageError, add_subparser, check_output, positive_int, stdout_to_stderr, write_output
from planner.cli.plan import add_constraint_flags, constraint_values

_EXAMPLES = """\
  meshplan sweep --model llama3.1-70b --cluster dgx-a100,dgx-h100,dgx-h200 --gpus 64..4096 \\
      --global-batch 512,1024 --seq-len 8192 --tokens 15T --price-per-gpu-hour 1.8,3.0,3.5 \\
      --workers 2 -o sweep.json --report sweep.html
  meshplan sweep --model llama3.1-8b --cluster dgx-h100 --gpus 8,16,32,64 --global-batch auto \\
      --critical-batch 512 --seq-len 4096 --tokens 2T --deadline 30d
  meshplan sweep --model gpt3-175b --cluster dgx-a100 --gpus 512..2048 --global-batch 1536 \\
      --seq-len 2048 --tp 8 --pp 8..16 -o sweep.csv"""

_DESCRIPTION = """\
Capacity planning: search the best plan (as `meshplan plan` does) for every cluster, GPU count,
sequence length and batch of the grid, and, for a token budget, the time to train, GPU-hours, cost
and energy of each; with --deadline, the smallest GPU count per cluster that finishes in time.
--gpus and --global-batch take N, a list N1,N2 or a range LO..HI (every power of two in it); a
--global-batch range or `auto` (powers of two within 4x of --critical-batch) is chosen per point to
train fastest under the gradient-noise-scale model of McCandlish et al. 2018. --tokens is the budget
of a run at the critical batch (without --critical-batch, of every run). Constraints (--tp, --pp,
--zero, ...) apply to every point as in `meshplan plan`; a point they cannot tile has no plan.
A mixed cluster (--cluster dgx-h100:16,dgx-a100:32) or --slow / --down plans every point as
`meshplan plan` does with those flags: the heterogeneous search (uneven shares, one GPU group per
stage) for the native target; a mixed cluster's --gpus is its groups' total."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` subcommand."""
    parser = add_subparser(subparsers, "sweep", "best plan, time and cost for a grid of clusters, GPU counts and batches", _DESCRIPTION, _EXAMPLES)
    what = parser.add_argument_group("grid")
    what.add_argument("--model", metavar="M", required=True, help="preset, config.json or module factory")
    what.add_argument("--cluster", metavar="C[,C2...]", required=True,
                      help="cluster presets or JSON files, or one mixed cluster's GPU groups C:N[,C:N...] (then --gpus is their total)")
    what.add_argument("--slow", metavar="GPU=SPEED", action="append",
                      help="a slow GPU (5=0.5) or node (node:2=0.7) at every point, speed in (0, 1]; comma-joined or repeated")
    what.add_argument("--down", metavar="node:N", action="append", help="a node that is gone (node:3) at every point; comma-joined or repeated")
    what.add_argument("--gpus", metavar="N|LO..HI", required=True, help="GPU counts: a list, or every power of two in LO..HI")
    what.add_argument("--global-batch", metavar="B|B1,B2|auto|LO..HI", required=True, help="batches (sequences per step)")
    what.add_argument("--seq-len", metavar="S[,S2]", required=True, help="sequence lengths")
    cost = parser.add_argument_group("budget")
    cost.add_argument("--tokens", metavar="D", help="token budget, e.g. 2T or 500B")
    cost.add_argument("--critical-batch", metavar="B", type=positive_int, help="critical batch in sequences (McCandlish et al. 2018)")
    cost.add_argument("--deadline", metavar="T", help="e.g. 30d, 12h, 2w: the smallest GPU count per cluster that trains in time")
    cost.add_argument("--price-per-gpu-hour", metavar="USD[,USD2]", help="one price, or one per cluster")
    cost.add_argument("--gpu-tdp-w", metavar="W", type=_positive("watts"), help="GPU power for the energy figure (default: the GPU profile's TDP)")
    cost.add_argument("--node-overhead-w", metavar="W", type=_non_negative("watts"), help="power per node besides the GPUs (default: from the vendor's system power)")
    how = parser.add_argument_group("search")
    how.add_argument("--target", choices=("native", "megatron", "torchtitan", "deepspeed"), default="native", help="engine the plans must suit")
    how.add_argument("--time-limit", metavar="SEC", type=_positive("seconds"), help="per-point search limit (as `meshplan plan --time-limit`)")
    how.add_argument("--memory-headroom", metavar="GIB", type=_non_negative("GiB"), default=0.0, help="GiB per GPU to keep free")
    how.add_argument("--precision", choices=("bf16", "fp8"), default="bf16",
                     help="GEMM precision of the blocks' projections at every point (fp8 needs FP8 tensor cores on every cluster)")
    how.add_argument("--compile", action=argparse.BooleanOptionalAction,
                     help="fused elementwise kernels at every point: torch.compile for torchtitan (also allows async TP); --no-compile for unfused code")
    how.add_argument("--workers", metavar="N", type=positive_int, default=1, help="local processes (default 1)")
    how.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster (auto, local or ray://host:port; needs meshplan[ray])")
    add_constraint_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE", help="write the sweep as .json, or .csv (one row per point)")
    out.add_argument("--report", metavar="FILE", help="write the HTML report here, plan files and plan reports in <stem>_plans/")
    out.add_argument("--json", action="store_true", help="print the sweep JSON on stdout instead of the table")
    parser.set_defaults(run=run)


def _positive(unit: str):
    """argparse type: a finite number above 0 of ``unit``."""
    return lambda text: _number(text, unit, zero=False)


def _non_negative(unit: str):
    """argparse type: a finite number of at least 0 of ``unit``."""
    return lambda text: _number(text, unit, zero=True)


def _number(text: str, unit: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a {'non-negative' if zero else 'positive'} number of {unit}, got '{text}'")
    return value


def _check_outputs(args: argparse.Namespace) -> None:
    if args.output is not None:
        check_output(args.output, "-o")
        if Path(args.output).suffix not in (".json", ".csv"):
            raise UsageError(f"sweep: -o {args.output} must end in .json or .csv (the file's format)")
    if args.report is not None:
        check_output(args.report, "--report")
        if Path(args.report).suffix not in (".html", ".htm"):
            raise UsageError(f"sweep: --report {args.report} must end in .html")
        from planner.cli._files_all import check_folder

        report = Path(args.report)
        check_folder(report.parent / f"{report.stem}_plans", "--report", report)


def run(args: argparse.Namespace) -> int:
    """Sweep, print the table (or JSON), write the files; errors leave for ``main``."""
    _check_outputs(args)
    from planner.errors import NoFeasiblePlanError
    from planner.capacity.api import sweep

    start = time.perf_counter()
    with stdout_to_stderr():  # a model factory's prints, a solver's banner: stdout carries the result alone
        result_run = sweep(model=args.model, cluster=args.cluster, gpus=args.gpus, global_batch=args.global_batch, seq_len=args.seq_len,
                           tokens=args.tokens, critical_batch=args.critical_batch, deadline=args.deadline,
                           price_per_gpu_hour=args.price_per_gpu_hour, target=args.target, time_limit_s=args.time_limit,
                           memory_headroom_gib=args.memory_headroom, precision=args.precision, compile=args.compile, workers=args.workers, ray=args.ray, gpu_tdp_w=args.gpu_tdp_w,
                           node_overhead_w=args.node_overhead_w, reports=args.report is not None, progress=_progress(),
                           slow=args.slow, down=args.down, **constraint_values(args))
    result = result_run.result
    miss = result.deadline_miss()
    if miss:
        raise NoFeasiblePlanError(miss)
    swept = f"meshplan: swept {len(result.points)} points in {time.perf_counter() - start:.1f} s"
    wrote = []  # printed after every file is written: a failure to write is the only line
    if args.report is not None:
        result, line = _write_report(result_run, Path(args.report))
        wrote.append(line)
    if args.output is not None:
        write_output(args.output, result.to_csv() if args.output.endswith(".csv") else result.to_json(), "-o")
        wrote.append(f"meshplan: wrote {args.output}")
    print("\n".join([swept, *wrote]), file=sys.stderr)
    if args.json:
        sys.stdout.write(result.to_json())
    else:
        _print(result)
    return EXIT_OK


def _write_report(run_, report: Path):
    """Every point's plan file and plan report, and the page, all or nothing
    (:func:`planner.cli._files_all.write_all`); returns the result with the file names, and the line
    that says what was written."""
    from planner.capacity.report import plan_files, render
    from planner.cli._files_all import write_all

    links = plan_files(run_.result, report)
    folder = report.parent / f"{report.stem}_plans"
    files: dict[Path, str] = {}
    for index, (plan_name, html_name) in links.items():
        files[report.parent / plan_name] = run_.plans[index]
        files[report.parent / html_name] = run_.reports[index]
    points = [pt.model_copy(update={"plan_file": links[pt.index][0], "report_file": links[pt.index][1]}) if pt.index in links else pt
              for pt in run_.result.points]
    result = run_.result.model_copy(update={"points": points})
    files[report] = render(result, links)
    write_all(files, report, "--report")
    return result, f"meshplan: wrote {report} and {len(links)} plans in {folder}"


def _print(result) -> None:
    from planner.cli._tables import print_table
    from planner.capacity.report import _cell

    headers = ["cluster", "GPUs", "seq", "batch", "step", "tokens/s", "MFU", "scaling", "free GiB", "days", "cost", "MWh", "plan"]
    rows = [[pt.cluster, str(pt.gpus), str(pt.seq_len), str(pt.global_batch or "-"), _cell(pt.step_time_s, "s"), _cell(pt.tokens_per_s, "count"),
             _cell(pt.mfu, "pct"), _cell(pt.scaling_efficiency, "eff"), _cell(pt.memory_headroom_gib, "gib"), _cell(pt.time_to_train_days, "days"),
             _cell(pt.cost_usd, "usd"), _cell(pt.energy_kwh, "kwh"), pt.plan_summary or pt.reason or ""] for pt in result.points]
    print_table(f"sweep: {result.request.model}", headers, rows)
    for answer in result.deadline or []:
        if answer.point is None:
            print(f"deadline: {answer.cluster}: no GPU count of the grid trains in time")
        else:
            cost = f", {_cell(answer.cost_usd, 'usd')}" if answer.cost_usd is not None else ""
            print(f"deadline: {answer.cluster}: {answer.gpus:,} GPUs, {answer.time_to_train_days:.1f} days{cost} (point {answer.point})")


def _progress():
    """A progress callback that prints to a terminal's stderr, nothing otherwise."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        print(f"\rmeshplan: {done}/{total} searches", end="" if done < total else "\n", file=sys.stderr, flush=True)

    return show
