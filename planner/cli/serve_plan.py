"""``meshplan serve-plan``: search serving deployments (per-instance parallelism, replicas, batch,
aggregated or disaggregated) for the most output tokens/s per GPU that meets the latency targets.
Writes the serving plan (``-o``), its HTML report (``--report``); exit 3 with the nearest miss when
no deployment meets the targets."""

from __future__ import annotations

import argparse
import sys

from planner.cli._common import EXIT_OK, add_subparser, check_output, write_output
from planner.cli.serve_estimate import add_workload_flags

_EXAMPLES = """\
  meshplan serve-plan --model llama3.1-70b --cluster dgx-h100 --gpus 8 --isl 1000 --osl 1000 \\
      --ttft-ms 1000 --tpot-ms 50 --precision fp8 -o serving.json --report serving.html
  meshplan serve-plan --model deepseek-r1 --cluster dgx-h200 --gpus 64 --isl 4000 --osl 1000 \\
      --ttft-ms 2000 --tpot-ms 50 --precision fp8 --disaggregation on --json
  meshplan export serving.json --to vllm"""

_DESCRIPTION = """\
Search every serving deployment of the model on the GPUs and pick the highest output tokens/s per GPU
meeting --ttft-ms and --tpot-ms. The plan (kind "serving") holds the chosen deployment's estimate,
the runners-up with why each lost, and the throughput-per-GPU vs tokens-per-user Pareto frontier."""


def _latency(text: str) -> float:
    """argparse type: a number of milliseconds (its sign is checked by the library, exit 2)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of milliseconds, got '{text}'") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve-plan`` subcommand."""
    parser = add_subparser(subparsers, "serve-plan", "search the best serving deployment", _DESCRIPTION, _EXAMPLES)
    add_workload_flags(parser)
    targets = parser.add_argument_group("latency targets and search")
    targets.add_argument("--ttft-ms", type=_latency, metavar="X", help="time to first token target, ms")
    targets.add_argument("--tpot-ms", type=_latency, metavar="Y", help="time per output token target, ms")
    targets.add_argument("--disaggregation", choices=("auto", "on", "off"), default="auto",
                         help="search disaggregated prefill/decode deployments too (auto, default), only (on) or never (off)")
    targets.add_argument("--max-batch", type=int, metavar="N",
                         help="most sequences one worker runs at once (vLLM --max-num-seqs, SGLang "
                              "--max-running-requests, TensorRT-LLM --max_batch_size; a load test's concurrency "
                              "per instance); default: the engine's own cap")
    targets.add_argument("--timing", action="store_true", help="record the search wall time in the plan")
    parser.add_argument("-o", "--output", metavar="SERVING_JSON", help="write the serving plan here (atomically)")
    parser.add_argument("--report", metavar="HTML", help="write the HTML report here")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import planner
    from planner.intake.jsonio import dumps

    for path, flag in ((args.output, "-o"), (args.report, "--report")):
        if path is not None:
            check_output(path, flag)
    plan = planner.serve_plan(model=args.model, cluster=args.cluster, gpus=args.gpus, isl=args.isl, osl=args.osl,
                              ttft_ms=args.ttft_ms, tpot_ms=args.tpot_ms, precision=args.precision,
                              kv_dtype=args.kv_dtype, engine=args.engine, disaggregation=args.disaggregation,
                              max_batch=args.max_batch, timing=args.timing)
    if args.output is not None:
        from planner.serving.files import plan_json

        write_output(args.output, plan_json(plan), "-o")
        print(f"meshplan: wrote {args.output}", file=sys.stderr)
    if args.report is not None:
        from planner.serving.report import render_serving_html

        write_output(args.report, render_serving_html(plan), "--report")
        print(f"meshplan: wrote {args.report}", file=sys.stderr)
    if args.json:
        print(dumps(plan.model_dump(), indent=2, sort_keys=True))
    else:
        from planner.cli._serving_view import plan_lines

        print("\n".join(plan_lines(plan.model_dump())))
    return EXIT_OK
