"""``meshplan validate plan.json``: check a plan file with the plan validator (``planner.plans.plan_checks``).

Exit 0 with a one-line "valid" summary on stdout; exit 2 with every problem on the one
``meshplan: error:`` line (joined with "; ") when the plan is invalid or cannot be read.
"""

from __future__ import annotations

import argparse

from planner.cli._common import EXIT_OK, add_retrace, add_subparser, stdout_to_stderr

_EXAMPLES = """\
  meshplan validate plan.json
  meshplan plan ... -o plan.json && meshplan validate plan.json"""

_DESCRIPTION = """\
Check a plan written by meshplan plan (or edited by hand): the degrees multiply to the GPU count,
every layer is in exactly one stage and in order, the batch divides, the interleaving rules hold,
the memory fits when the configuration is re-estimated (and the stored estimate is the re-estimate),
and the target engine can express it. The model is the plan's own layer list (or its preset): reading
a plan never imports or runs anything it names, unless --retrace asks to rebuild the model."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` subcommand."""
    parser = add_subparser(subparsers, "validate", "check a plan file", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    add_retrace(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate the plan; problems leave as one InputError (exit 2) for ``main``."""
    from planner.cli._serving_export import plan_kind

    if plan_kind(args.plan) == "serving":  # a serving plan (meshplan serve-plan)
        from planner.serving.files import load_serving_plan

        est = load_serving_plan(args.plan).estimate
        print(f"{args.plan}: valid (serving, {est.deployment.mode}): {est.output_tokens_per_s_per_gpu:.1f} output "
              f"tokens/s per GPU, TTFT {est.ttft_ms:.1f} ms, TPOT {est.tpot_ms:.2f} ms")
        return EXIT_OK
    from planner.plans.load import check_plan
    from planner.plans.named_model import plan_model
    from planner.plans.files import read_plan
    from planner.plans.build import summary

    plan = read_plan(args.plan)
    with stdout_to_stderr():  # a re-traced factory's prints
        model = plan_model(plan, retrace=True) if args.retrace else None
    check_plan(plan, model, f"plan {args.plan}")
    est = plan.estimate
    print(f"{args.plan}: valid ({plan.request.target}): {summary(plan.config)}; step {est.step_time_s:.4g} s, "
          f"{est.peak_memory_gib:.1f} of {est.memory_capacity_gib:.1f} GiB per GPU")
    return EXIT_OK
