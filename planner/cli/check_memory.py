"""``meshplan check-memory plan.json [--model M] [--json]``: a plan's per-GPU memory measured by torch.

Builds the plan's model on the meta device, applies the plan on torch's fake process group of the
plan's full world size, runs one training step on fake tensors under torch's FSDPMemTracker and
prints each pipeline-rank kind's peak by category beside the cost model's prediction
(:mod:`planner.runtime.memcheck.check`). No GPU and no memory are needed.
"""

from __future__ import annotations

import argparse
import json

from planner.cli._common import EXIT_OK, add_retrace, add_subparser

_EXAMPLES = """\
  meshplan check-memory plan.json                    # a preset plan
  meshplan check-memory plan.json --model path/to/config.json --json
  meshplan check-memory plan.json --model llama3.1-8b --full-depth --pp-rank 0"""

_DESCRIPTION = """\
Measure a plan's per-GPU peak memory with PyTorch's own accounting: the model is built on the meta
device, the plan is applied (DTensor TP/SP, FSDP2 in the plan's bf16 mixed precision, per-layer
checkpointing, this rank's pipeline chunks) on torch's fake process group of the plan's world size,
and one training step (the forwards the schedule holds, backward, AdamW) runs on fake tensors under
torch.distributed._tools' FSDPMemTracker. Each kind of pipeline rank is printed with its measured
peak by category (parameters, gradients, optimizer states, activations, temporaries, communication
buffers) beside the cost model's prediction. Terms a GPU run has and the tracker cannot see (CUDA
context and NCCL: the cluster's runtime overhead; allocator slack) are listed apart. Models whose
blocks repeat are measured at two shallow depths and extrapolated (exact: memory is affine in the
depth); --full-depth runs every block. The model is built from --model (checked against the plan's
model SHA-256), never from a factory or file the plan names unless --retrace says so (it runs the
factory: only for plans you trust); a preset plan needs neither."""

_CATEGORIES = ("params", "grads", "optimizer_states", "activations", "temporaries", "buffers")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check-memory`` subcommand."""
    parser = add_subparser(subparsers, "check-memory", "measure a plan's per-GPU memory with torch's tracker",
                           _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    parser.add_argument("--model", metavar="M", help="the plan's model: preset, config.json or file.py:factory (checked against "
                        "the plan's model SHA-256; needed unless the plan's model is a preset or --retrace is given)")
    parser.add_argument("--pp-rank", type=int, action="append", metavar="R",
                        help="pipeline rank to measure (repeatable; default: the first of each kind)")
    parser.add_argument("--full-depth", action="store_true", help="measure every block instead of extrapolating")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_retrace(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Measure and print; bad input leaves as InputError (exit 2)."""
    from planner.errors import InputError
    from planner.plans.load import load_plan
    from planner.runtime.memcheck.check import check_memory

    plan = load_plan(args.plan, retrace=args.retrace)
    bad = [r for r in args.pp_rank or () if not 0 <= r < plan.mesh.pp]
    if bad:
        raise InputError(f"--pp-rank {bad[0]} is not a pipeline rank of the plan (pp {plan.mesh.pp}: 0..{plan.mesh.pp - 1})")
    result = check_memory(plan, model=args.model, pp_ranks=args.pp_rank, full_depth=args.full_depth, retrace=args.retrace)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
        return EXIT_OK
    m = result.mesh
    print(f"{result.model}: {result.world_size} GPUs (dp {m['dp']} x tp {m['tp']} x pp {m['pp']} x cp {m['cp']}, "
          f"zero {m['zero']}{', sp' if m['sp'] else ''}), {result.schedule}, micro-batch {result.micro_batch} x "
          f"{result.num_microbatches}")
    for row in result.ranks:
        print(f"\npipeline rank {row.pp_rank} ({row.ranks_of_kind} of this kind, layers "
              f"{', '.join(f'{a}-{b - 1}' for a, b in row.layers)}), measured in {row.seconds:.1f} s")
        unit, scale = _unit(max(row.measured_peak_gib, row.predicted_peak_gib))
        print(f"  {unit:18} {'measured':>9} {'predicted':>9}")
        for cat in _CATEGORIES:
            print(f"  {cat:18} {row.measured_gib.get(cat, 0.0) * scale:9.2f} {row.predicted_gib.get(cat, 0.0) * scale:9.2f}")
        print(f"  {'peak':18} {row.measured_peak_gib * scale:9.2f} {row.predicted_peak_gib * scale:9.2f}   error {row.error:+.1%}")
        extra = ", ".join(f"{k.replace('_', ' ')} {_size(v)}" for k, v in row.gpu_only_gib.items())
        print(f"  GPU-only (not tracked): {extra}; predicted per GPU {_size(row.predicted_gpu_peak_gib)}")
    for note in result.notes:
        print(f"note: {note}")
    return EXIT_OK


def _unit(gib: float) -> tuple[str, float]:
    """The table's unit for a rank whose larger peak is ``gib``: GiB, or MiB / KiB for small models
    (the differential sweep's ranks hold a few hundred KiB, which GiB to two decimals shows as 0.00)."""
    for name, scale in (("GiB", 1.0), ("MiB", 1024.0)):
        if gib * scale >= 1.0:
            return name, scale
    return "KiB", 1024.0**2


def _size(gib: float) -> str:
    """``gib`` with two decimals in the largest unit that shows it at 1 or more (KiB at the least)."""
    name, scale = _unit(gib)
    return f"{gib * scale:.2f} {name}"
