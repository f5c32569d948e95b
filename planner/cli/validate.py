"""``meshplan validate plan.json``: check a plan file with the plan validator (``planner.validate``).

Exit 0 with a one-line "valid" summary on stdout; exit 2 with every problem on the one
``meshplan: error:`` line (joined with "; ") when the plan is invalid or cannot be read.
"""

from __future__ import annotations

import argparse

from planner.cli._common import EXIT_OK, add_subparser

_EXAMPLES = """\
  meshplan validate plan.json
  meshplan plan ... -o plan.json && meshplan validate plan.json"""

_DESCRIPTION = """\
Check a plan written by meshplan plan (or edited by hand): the degrees multiply to the GPU count,
every layer is in exactly one stage and in order, the batch divides, the interleaving rules hold,
the memory fits when the configuration is re-estimated (and the stored estimate is the re-estimate),
and the target engine can express it. The model is rebuilt from the plan's model argument."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` subcommand."""
    parser = add_subparser(subparsers, "validate", "check a plan file", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate the plan; problems leave as one InputError (exit 2) for ``main``."""
    from planner.errors import InputError
    from planner.plans import load_plan, summary
    from planner.validate import plan_problems

    plan = load_plan(args.plan)
    problems = plan_problems(plan)
    if problems:
        raise InputError(f"plan {args.plan} is invalid: {problems[0]}", *problems[1:])
    est = plan.estimate
    print(f"{args.plan}: valid ({plan.request.target}): {summary(plan.config)}; step {est.step_time_s:.4g} s, "
          f"{est.peak_memory_gib:.1f} of {est.memory_capacity_gib:.1f} GiB per GPU")
    return EXIT_OK
