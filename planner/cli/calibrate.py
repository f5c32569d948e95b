"""``meshplan calibrate``: fit a cluster's efficiency factors to measured runs and write the
calibrated cluster (the file ``plan`` and ``estimate`` read), reporting the step-time error before,
after, and under leave-one-shape-out cross-validation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from planner.cli._common import EXIT_OK, add_subparser

_EXAMPLES = """\
  meshplan calibrate run_*.json --cluster my_cluster.json -o calibrated.json
  meshplan calibrate my_runs.csv --cluster dgx-h100 --params compute,step_fixed -o h100_ours.json
  meshplan plan --model llama3.1-8b --cluster calibrated.json --gpus 64 --global-batch 512 --seq-len 8192

  my_runs.csv:
    model,gpus,global_batch,seq_len,tp,pp,micro_batch,recompute,step_time_s,peak_memory_gib
    llama3.1-8b,64,512,8192,2,1,1,selective,6.21,61.5"""

_DESCRIPTION = """\
Fit a few named efficiency factors of CLUSTER to measured step times: compute (share of the GEMM
ceiling), attention (share of the attention-kernel rate), memory (share of memory bandwidth),
overhead (fixed time per kernel, us), comm
(share of collective bandwidth), step_fixed (host time per step, s), and, only with --params, overlap
(compute slowdown under communication) and latency (multiplier of the per-hop collective latency). Bounded robust least squares on log step time; factors the
runs do not exercise are kept (or refused when named in --params); a fit with fewer distinct run
shapes than factors is refused. RUNS are run records (meshplan run -o run.json) and CSV files with
columns model, gpus, global_batch, seq_len, step_time_s (required), tp, pp, cp, vpp, micro_batch, sp,
recompute, zero, schedule, peak_memory_gib, label (optional)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` subcommand."""
    parser = add_subparser(subparsers, "calibrate", "fit a cluster's efficiencies to measured runs", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("runs", nargs="+", metavar="RUNS", help="run-record JSON files and/or CSV files of measured runs")
    parser.add_argument("--cluster", required=True, metavar="C", help="cluster preset or JSON file to calibrate")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="calibrated cluster JSON to write")
    parser.add_argument("--params", metavar="F,...", help="factors to fit (default: compute,attention,memory,overhead,comm,step_fixed where the runs exercise them)")
    parser.add_argument("--name", help="the calibrated cluster's name (default: the output file's stem)")
    parser.add_argument("--json", action="store_true", help="print the calibration (factors, errors, runs) as one JSON object")
    parser.add_argument("--retrace", action="store_true",
                        help="build models from factories (file.py:fn) the runs name, importing and running them "
                             "(only for files you trust; by default a factory named in a run is refused)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load, fit, write atomically, print."""
    from planner.calibration import calibrate, calibrated_entry, load_observations
    from planner.calibration.output import calibration_block
    from planner.cli._cluster_out import check_target, resolve_cluster_entry, write_cluster_file
    from planner.intake.arguments import resolve_cluster_arg

    check_target(args.output)
    cluster = resolve_cluster_arg(args.cluster)
    params = [p.strip() for p in args.params.split(",") if p.strip()] if args.params else None
    runs = load_observations(args.runs, cluster, retrace=args.retrace)
    result = calibrate(runs, cluster, params)
    entry = calibrated_entry(args.cluster, result, args.name or Path(args.output).stem)
    resolve_cluster_entry(entry, args.output)
    write_cluster_file(args.output, entry)
    if args.json:
        print(json.dumps(calibration_block(result), indent=2))
    else:
        from planner.cli._calibrate_view import print_calibration

        print_calibration(result, args.output)
    return EXIT_OK
