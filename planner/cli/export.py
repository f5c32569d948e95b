"""``meshplan export plan.json --to megatron|torchtitan|deepspeed [-o FILE]``: what a launcher runs.

Native forms: Megatron-LM a bash launcher (argument arrays and the ``torchrun ... pretrain_gpt.py``
line), torchtitan a TOML job config, DeepSpeed its config JSON (the ``PipelineModule`` settings it
takes in code go to stderr). ``--format json`` prints one JSON object instead. A plan the engine
cannot express exits 2 naming the plan field.
"""

from __future__ import annotations

import argparse
import sys

from planner.cli._common import EXIT_OK, add_retrace, add_subparser, check_output, stdout_to_stderr, write_output

_EXAMPLES = """\
  meshplan export plan.json --to megatron -o launch.sh
  meshplan export plan.json --to megatron --format json     # grouped argv lists + flat argv
  meshplan export plan.json --to torchtitan -o job.toml
  meshplan export plan.json --to deepspeed -o ds_config.json
  meshplan export serving.json --to vllm -o serve.sh        # a serving plan (meshplan serve-plan)
  meshplan export serving.json --to sglang
  meshplan export serving.json --to trtllm"""

_DESCRIPTION = """\
Write a plan as an engine's configuration, with the engine's current names: Megatron-LM arguments,
a torchtitan job config (parallelism, activation_checkpoint, training), or a DeepSpeed config JSON.
A plan that uses something the engine cannot express (ZeRO-2/3 with pipelining for DeepSpeed, say)
is refused with exit code 2 and the plan field named; plan with --target ENGINE to avoid that."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    parser = add_subparser(subparsers, "export", "write a plan as an engine configuration", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    parser.add_argument("--to", required=True, choices=("megatron", "torchtitan", "deepspeed", "vllm", "sglang", "trtllm"),
                        help="the engine (vllm, sglang, trtllm take a serving plan)")
    parser.add_argument("--format", choices=("native", "json"), default="native",
                        help="native: the engine's file form (default); json: one JSON object")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here, atomically, instead of stdout ('-' is stdout)")
    add_retrace(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Export the plan once it validates; a refusal leaves as an InputError (exit 2) for ``main``."""
    from planner.cli._serving_export import is_serving_export, run_serving_export

    to_file = args.output is not None and args.output != "-"
    if to_file:
        check_output(args.output, "-o")  # an output that cannot be written is said first, before any reading
    if is_serving_export(args.plan, args.to):
        return run_serving_export(args)
    from planner.outputs.export import engine_export, text_of
    from planner.plans.load import load_plan_and_model

    with stdout_to_stderr():  # a re-traced factory's prints
        plan, model = load_plan_and_model(args.plan, args.retrace)
    result = engine_export(plan, args.to, model)  # load_plan_and_model has checked the plan
    text = text_of(result, args.to, args.format)
    code = result.python() if args.to == "deepspeed" and args.format == "native" else ""  # type: ignore[union-attr]
    if to_file:
        write_output(args.output, text, "-o", executable=args.to == "megatron" and args.format == "native")
        print(f"meshplan: wrote {args.output} ({args.to}, {args.format})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if code:
        print("meshplan: DeepSpeed takes these settings in code:\n" + code.rstrip(), file=sys.stderr)
    return EXIT_OK
