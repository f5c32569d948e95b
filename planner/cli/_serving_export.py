"""``meshplan export serving.json --to vllm|sglang|trtllm``: the serving half of ``export``, picked by
the plan file's ``kind`` (a training plan has none)."""

from __future__ import annotations

import argparse
import sys

from planner.cli._common import EXIT_OK, check_output, write_output

SERVING_ENGINES = ("vllm", "sglang", "trtllm")


def plan_kind(path: str) -> object:
    """The ``kind`` of a plan file (None for a training plan), read as strictly as every plan reader
    (``planner.intake.jsonio.read_json``: regular files only, size cap, linear nesting check): a FIFO or
    ``/dev/zero`` is refused at once with one line, never waited on."""
    from planner.intake.jsonio import read_json

    data = read_json(path, f"plan {path}", "regenerate it with meshplan plan or meshplan serve-plan")
    return data.get("kind") if isinstance(data, dict) else None


def is_serving_export(path: str, target: str) -> bool:
    """True when this export is a serving one; InputError when plan kind and target disagree."""
    from planner.errors import InputError

    serving_target = target in SERVING_ENGINES
    serving_plan = plan_kind(path) == "serving"
    if serving_target and not serving_plan:
        raise InputError(f"{path} is not a serving plan; --to {target} exports plans written by meshplan serve-plan")
    if serving_plan and not serving_target:
        raise InputError(f"{path} is a serving plan; export it --to vllm, sglang or trtllm")
    return serving_target


def run_serving_export(args: argparse.Namespace) -> int:
    from planner.intake.arguments import resolve_cluster_arg
    from planner.serving.export import export_serving
    from planner.serving.files import load_serving_plan

    if args.format != "native":
        from planner.errors import InputError

        raise InputError("serving exports are launch scripts; drop --format json")
    to_file = args.output is not None and args.output != "-"
    if to_file:
        check_output(args.output, "-o")
    plan = load_serving_plan(args.plan)
    text = export_serving(plan, args.to, resolve_cluster_arg(plan.cluster).gpus_per_node)
    if to_file:
        write_output(args.output, text, "-o", executable=True)
        print(f"meshplan: wrote {args.output} ({args.to} launch script)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
