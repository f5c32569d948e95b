"""``meshplan replan plan.json --observed run.json``: infer each GPU's speed from a run and re-plan.

The speeds come from the run record's per-rank compute and injected-wait times (median over the
timed steps, relative to the fastest rank of the same GPU type, rounded; ``planner.calibration.replan``).
stdout: the inferred slow GPUs, the predicted step continuing as planned and re-planned, and the
gain; ``--json`` prints one object with the same facts; ``-o`` writes the new plan.
"""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli._common import EXIT_OK, add_subparser, check_output, write_output

_EXAMPLES = """\
  meshplan run plan.json --nproc-per-node 4 --inject-slowdown 3=0.5 -o run.json
  meshplan replan plan.json --observed run.json -o replanned.json"""

_DESCRIPTION = """\
Read a run record's per-rank times, infer each GPU's speed (median busy time per micro-batch over the
timed steps, relative to the fastest GPU of the same type, rounded to 0.05; 0.9 and above count as
full speed) and write the plan for the cluster as it really is, with the predicted gain over
continuing as planned."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``replan`` subcommand."""
    parser = add_subparser(subparsers, "replan", "re-plan from a run's measured per-GPU speeds", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="the plan that ran")
    parser.add_argument("--observed", metavar="RUN_JSON", required=True, help="its run record (meshplan run -o)")
    parser.add_argument("-o", "--output", metavar="PLAN_JSON", help="write the new plan here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Infer, re-plan, print and write."""
    if args.output:
        check_output(args.output, "-o")
    from pydantic import ValidationError

    from planner.errors import InputError
    from planner.intake.jsonio import read_json
    from planner.plans.load import load_plan_and_model
    from planner.calibration.replan import replan
    from planner.runtime.record import RunRecord

    plan, model = load_plan_and_model(args.plan)
    try:
        record = RunRecord.model_validate(read_json(args.observed, f"run record {args.observed}", "record it with meshplan run -o"))
    except ValidationError as err:
        raise InputError(f"run record {args.observed} is malformed: {err.errors()[0]['msg'].lower()}") from None
    done = replan(plan, model, record)
    if args.output:
        write_output(args.output, done.plan.to_json(), "-o")
    slow = {gpu: s for gpu, s in done.speeds.items() if s < 1.0}
    facts = {"speeds": {str(g): s for g, s in done.speeds.items()}, "slow": {str(g): s for g, s in slow.items()},
             "continuing_step_s": done.continuing_step_s, "replanned_step_s": done.replanned_step_s, "gain": done.gain,
             "plan": args.output}
    if args.json:
        sys.stdout.write(json.dumps(facts) + "\n")
        return EXIT_OK
    named = ", ".join(f"GPU {g} at {s:g}" for g, s in slow.items()) or "none (every GPU within timing noise of its type's fastest)"
    print(f"inferred slow GPUs: {named}")
    print(f"predicted step: {done.continuing_step_s:.4g} s continuing as planned, {done.replanned_step_s:.4g} s re-planned "
          f"({done.gain:.2f}x)")
    return EXIT_OK
