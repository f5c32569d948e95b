"""``meshplan estimate``: predicted step time, throughput and memory of one parallel configuration.

Two forms (DESIGN.md): the configuration as flags, or ``--plan plan.json`` to re-estimate a plan.
``--json`` prints ``planner.estimate(...).model_dump()`` as one JSON object; otherwise a summary
table. A configuration that does not fit in memory is still an estimate (exit 0, ``fits: false``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from planner.cli._common import EXIT_OK, UsageError, add_retrace, add_subparser, check_output, positive_int, stdout_to_stderr, write_output

_EXAMPLES = """\
  meshplan estimate --model gpt3-175b --cluster dgx-a100 --gpus 1024 \\
      --global-batch 1536 --seq-len 2048 --tp 8 --pp 16
  meshplan estimate --model llama3.1-8b --cluster dgx-h100 --gpus 64 \\
      --global-batch 512 --seq-len 8192 --tp 2 --cp 2 --recompute selective --zero 1 --json
  meshplan estimate --model path/to/config.json --cluster my_cluster.json --gpus 16 \\
      --global-batch 64 --seq-len 4096 --tp 4 --pp 2 --vpp 2 --micro-batch 2
  meshplan estimate --model llama3.1-8b --cluster dgx-h100 --gpus 8 \\
      --global-batch 64 --seq-len 8192 --tp 2 --pp 2 -o plan.json
  meshplan estimate --model llama3.1-8b --cluster dgx-h100 --gpus 8 --global-batch 16 \\
      --seq-len 8192 --micro-batch 2 --recompute selective --target torchtitan --compile --precision fp8
  meshplan estimate --model llama3.1-8b --cluster dgx-h100:16,dgx-a100:32 --gpus 48 \
      --global-batch 512 --seq-len 4096 --tp 2 --pp 2 --slow 5=0.5 --down node:3
  meshplan estimate --plan plan.json --json"""

_DESCRIPTION = """\
Estimate one configuration: step time, tokens/s, MFU, TFLOP/s per GPU, peak memory per GPU against
capacity, and where the time and memory go. DP is derived: gpus / (tp x pp x cp).
MODEL is a preset name (meshplan list models), a Hugging Face config.json, or
path/to/file.py:factory / package.module:factory returning a torch.nn.Module.
CLUSTER is a preset name (meshplan list clusters) or a cluster JSON file, or GPU groups in order
(dgx-h100:16,dgx-a100:32 or a groups JSON file). On groups, or with --slow / --down, the
configuration is priced as a uniform plan on the GPUs that are up (replicas in GPU order, equal
shares, each stage on its own GPU type and speed: the step waits for the slowest replica);
`meshplan plan` on the same cluster finds uneven shares."""

_REQUIRED = ("model", "cluster", "gpus", "global_batch", "seq_len")
"""Flags the flag form needs (dest names)."""
_ENGINE_FLAGS = (
    "target", "precision", "attention", "tp_overlap", "tp_async", "grad_reduce_dtype", "dp_overlap", "compile",
    "loss_fusion", "grad_accum_fusion", "offload_optimizer", "offload_activations", "zero3_bucket",
)
"""Engine knobs (``planner.estimation.knobs``): None = the target engine's default."""
_LAYOUT_FLAGS = ("ep", "schedule", "stage_layers")
"""Further parallel settings, passed only when given (``planner.estimate`` defaults otherwise)."""
_CLUSTER_FLAGS = ("slow", "down")
"""Degraded-cluster flags, passed only when given."""
_CONFIG_FLAGS = (*_REQUIRED, "tp", "pp", "cp", "vpp", "micro_batch", "sp", "recompute", "zero", "trace", *_ENGINE_FLAGS, *_LAYOUT_FLAGS,
                 *_CLUSTER_FLAGS)
"""Every configuration flag; none of them may accompany ``--plan``."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``estimate`` subcommand."""
    parser = add_subparser(subparsers, "estimate", "estimate one parallel configuration", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("--plan", metavar="PLAN_JSON", help="estimate the configuration of a plan file instead")
    what = parser.add_argument_group("model, hardware and batch (required unless --plan)")
    what.add_argument("--model", metavar="M", help="preset, config.json or module factory")
    what.add_argument("--trace", action="store_true", default=None, help="build a config.json model with transformers on the meta device and trace it")
    what.add_argument("--cluster", metavar="C", help="cluster preset or JSON file, or GPU groups in order: C:N[,C:N...]")
    what.add_argument("--slow", metavar="GPU=SPEED", action="append",
                      help="a slow GPU (5=0.5) or node (node:2=0.7), speed in (0, 1]; comma-joined or repeated; GPUs and nodes numbered across the groups")
    what.add_argument("--down", metavar="node:N", action="append", help="a node that is gone (node:3); comma-joined or repeated")
    what.add_argument("--gpus", metavar="N", type=positive_int, help="number of GPUs")
    what.add_argument("--global-batch", metavar="B", type=positive_int, help="sequences per optimizer step")
    what.add_argument("--seq-len", metavar="S", type=positive_int, help="tokens per sequence")
    how = parser.add_argument_group("parallel configuration")
    how.add_argument("--tp", metavar="T", type=positive_int, help="tensor-parallel degree (default 1)")
    how.add_argument("--pp", metavar="P", type=positive_int, help="pipeline-parallel degree (default 1)")
    how.add_argument("--cp", metavar="C", type=positive_int, help="context-parallel degree (default 1)")
    how.add_argument("--vpp", metavar="V", type=positive_int, help="virtual stages per pipeline rank (default 1)")
    how.add_argument("--micro-batch", metavar="MB", type=positive_int, help="sequences per micro-batch (default 1)")
    how.add_argument("--ep", metavar="E", type=positive_int, help="expert-parallel degree for MoE layers, carved out of dp x cp (default 1)")
    how.add_argument("--schedule", choices=("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"), help="pipeline schedule (default 1f1b, interleaved-1f1b with --vpp > 1)")
    how.add_argument("--stage-layers", metavar="N,N,...", type=_layer_counts,
                     help="model layers of each of the pp x vpp chunks in chunk order, e.g. 1,8,8,8,8,2 (Llama 3's layout: embedding alone first, norm + head last)")
    how.add_argument(
        "--sp",
        action=argparse.BooleanOptionalAction,
        help="Megatron sequence parallelism (default: on when tp > 1)",
    )
    how.add_argument(
        "--recompute", choices=("none", "selective", "full"), help="activation recomputation (default none)"
    )
    how.add_argument(
        "--zero",
        type=int,
        choices=(0, 1, 2, 3),
        help="sharding over dp: 0 none, 1 optimizer (default), 2 + gradients, 3 + parameters",
    )
    _add_engine_flags(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("-o", "--output", metavar="PLAN_JSON",
                        help="also write the plan file of exactly this configuration (atomically; it must fit in memory)")
    add_retrace(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Estimate the configuration and print it; bad input leaves as an exception for ``main``."""
    _check_form(args)
    with stdout_to_stderr():  # a model factory's prints go to stderr: stdout carries the result alone
        result = _estimate(args)
    if args.json:
        from planner.intake.jsonio import dumps

        print(dumps(result.model_dump(), indent=2))
    else:
        from planner.cli._summary import print_summary

        print_summary(result.model_dump())
    return EXIT_OK


def _estimate(args: argparse.Namespace):  # noqa: ANN202 (EstimateResult, imported lazily)
    """The estimate the flags (or ``--plan``) ask for."""
    import planner  # deferred: the cost model is not needed for --help or argument errors

    if args.plan is not None:
        return planner.estimate_plan(args.plan, retrace=args.retrace)
    estimate = _plan_writer(args.output) if args.output is not None else planner.estimate
    return estimate(
        model=args.model,
        cluster=args.cluster,
        gpus=args.gpus,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        tp=args.tp or 1,
        pp=args.pp or 1,
        cp=args.cp or 1,
        vpp=args.vpp or 1,
        micro_batch=args.micro_batch or 1,
        sp=args.sp,
        recompute=args.recompute or "none",
        zero=args.zero,
        trace=bool(args.trace),
        **{name: getattr(args, name) for name in _ENGINE_FLAGS},
        **{name: getattr(args, name) for name in (*_LAYOUT_FLAGS, *_CLUSTER_FLAGS) if getattr(args, name) is not None},
    )


def _layer_counts(text: str) -> tuple[int, ...]:
    """``--stage-layers``: comma-separated non-negative layer counts."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer counts such as 1,8,8,2, got {text!r}") from None
    if any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError(f"layer counts must be 0 or more, got {text!r}")
    return counts


def _plan_writer(path: str) -> Callable[..., Any]:
    """``planner.estimate`` that also writes the plan of the configuration to ``path`` (``-o``)."""

    def estimate_and_write(**settings: Any) -> Any:
        from planner.plans.given import config_plan

        plan = config_plan(**settings)
        write_output(path, plan.to_json(), "-o")  # refuses what every -o refuses: symbolic links, devices, FIFOs
        print(f"meshplan: wrote {path}", file=sys.stderr)
        return plan.estimate

    return estimate_and_write


def _add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine, its precision and the implementation knobs the cost model has."""
    eng = parser.add_argument_group("engine and precision (defaults: what the target engine does)")
    eng.add_argument("--target", choices=("native", "megatron", "torchtitan", "deepspeed"), help="engine whose behaviour to model (default native)")
    eng.add_argument("--precision", choices=("bf16", "fp8"), help="GEMM precision of the blocks' projections (default bf16; MXFP8 on Blackwell)")
    eng.add_argument("--attention", choices=("flash", "eager"), help="attention kernel (default flash; eager on GPUs without FlashAttention)")
    eng.add_argument("--tp-overlap", action=argparse.BooleanOptionalAction, help="overlap TP communication with GEMMs (Megatron --tp-comm-overlap, torchtitan async TP)")
    eng.add_argument("--tp-async", action=argparse.BooleanOptionalAction, help="TP backward collectives behind the column-parallel GEMMs (Megatron's async TP; default on for megatron/native)")
    eng.add_argument("--grad-reduce-dtype", choices=("bf16", "fp32"), help="gradient reduction dtype (default: the engine's, fp32)")
    eng.add_argument("--dp-overlap", action=argparse.BooleanOptionalAction, help="overlap gradient reduction and parameter gathers with compute (default on)")
    eng.add_argument("--compile", action=argparse.BooleanOptionalAction, help="fused elementwise kernels: torch.compile (torchtitan default off), Megatron's fused kernels (default on)")
    eng.add_argument("--loss-fusion", action=argparse.BooleanOptionalAction, help="Megatron's fused cross-entropy (--cross-entropy-loss-fusion)")
    eng.add_argument("--grad-accum-fusion", action=argparse.BooleanOptionalAction, help="Megatron's gradient-accumulation fusion (default on; --no-grad-accum-fusion for code before it)")
    eng.add_argument("--offload-optimizer", action="store_true", default=None, help="optimizer states on the host (needs the cluster's host_link_bandwidth_gbps)")
    eng.add_argument("--zero3-bucket", metavar="PARAMS", type=positive_int, help="parameters per ZeRO-3 gather / reduce-scatter (DeepSpeed stage3_prefetch_bucket_size; default one per layer)")
    eng.add_argument("--offload-activations", action="store_true", default=None, help="stored activations on the host between forward and backward")


def _check_form(args: argparse.Namespace) -> None:
    """Either ``--plan`` alone or the required flags: say which flags are missing or in the way."""
    if args.plan is not None and args.output is not None:
        raise UsageError("estimate: -o writes the plan of a configuration given by flags; with --plan the plan file exists already")
    if args.output is not None and (args.slow or args.down or _names_groups(args.cluster)):
        raise UsageError("estimate: -o writes a uniform plan file; on GPU groups or with --slow / --down use meshplan plan -o")
    if args.output is not None:
        check_output(args.output, "-o")  # before any work
    if args.plan is not None:
        extra = [_flag(dest) for dest in _CONFIG_FLAGS if getattr(args, dest) is not None]
        if extra:
            raise UsageError(f"estimate: --plan takes no configuration flags (remove {', '.join(extra)})")
        return
    if args.retrace:
        raise UsageError("estimate: --retrace applies to --plan only (the flags' model is built anyway)")
    missing = [_flag(dest) for dest in _REQUIRED if getattr(args, dest) is None]
    if missing:
        raise UsageError(f"estimate: missing {', '.join(missing)} (or give --plan plan.json)")


def _names_groups(cluster: str | None) -> bool:
    """Whether ``--cluster`` names GPU groups (``C:N[,C:N]``, or a groups JSON file)."""
    if cluster is None:
        return False
    from planner.intake.groups import names_groups

    return names_groups(cluster)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")
