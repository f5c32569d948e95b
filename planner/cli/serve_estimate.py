"""``meshplan serve-estimate``: throughput, latency and memory of one serving deployment.

Aggregated: ``--tp`` (and ``--pp``, ``--ep``, ``--attention-dp``) per replica, N / (tp x pp)
replicas. Disaggregated: ``--prefill-workers A --prefill-tp T1 --decode-workers B --decode-tp T2``
(and their ``--*-pp``, ``--*-ep``, ``--*-attention-dp``) instead of ``--tp``. ``--json`` prints
``planner.serve_estimate(...).model_dump()``. A deployment whose weights do not fit is still an
estimate only in the API (``fits: false``, ``shortfall_gib``); the command prints no rate for it:
one line on stderr with the shortfall per GPU, exit 3.
"""

from __future__ import annotations

import argparse

import sys

from planner.cli._common import EXIT_NO_PLAN, EXIT_OK, add_subparser, positive_int

_EXAMPLES = """\
  meshplan serve-estimate --model llama3.1-70b --cluster dgx-h100 --gpus 8 --tp 4 \\
      --isl 1000 --osl 1000 --precision fp8
  meshplan serve-estimate --model qwen3-235b-a22b --cluster dgx-b200 --gpus 8 --tp 8 --ep 8 \\
      --attention-dp --isl 1000 --osl 2000 --precision fp4 --kv-dtype fp8 --engine trtllm --json
  meshplan serve-estimate --model deepseek-r1 --cluster dgx-h200 --gpus 64 --isl 4000 --osl 1000 \\
      --precision fp8 --prefill-workers 2 --prefill-tp 8 --decode-workers 6 --decode-tp 8 \\
      --decode-ep 8 --decode-attention-dp --concurrency 4096"""

_DESCRIPTION = """\
Estimate one serving deployment in steady state under continuous batching: output tokens/s (whole
deployment, per GPU, per user), TTFT, TPOT, KV cache and its concurrency limit, memory per GPU and
the bottleneck. Without --concurrency each worker runs the largest batch that fits (max throughput)."""

_DISAGG = ("workers", "tp", "pp", "ep", "attention_dp")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve-estimate`` subcommand."""
    parser = add_subparser(subparsers, "serve-estimate", "estimate one serving deployment", _DESCRIPTION, _EXAMPLES)
    add_workload_flags(parser)
    how = parser.add_argument_group("aggregated deployment")
    how.add_argument("--tp", type=positive_int, help="tensor-parallel GPUs per replica")
    how.add_argument("--pp", type=positive_int, default=1, help="pipeline stages per replica (default 1)")
    how.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree inside tp (MoE; default 1)")
    how.add_argument("--attention-dp", action="store_true", help="attention data parallelism over the tp GPUs (MoE)")
    how.add_argument("--concurrency", type=positive_int, help="sequences in flight in the whole deployment")
    for side in ("prefill", "decode"):
        group = parser.add_argument_group(f"disaggregated: {side} workers")
        group.add_argument(f"--{side}-workers", type=positive_int, help=f"{side} workers")
        group.add_argument(f"--{side}-tp", type=positive_int, help=f"tensor-parallel GPUs per {side} worker")
        group.add_argument(f"--{side}-pp", type=positive_int, default=1, help="pipeline stages (default 1)")
        group.add_argument(f"--{side}-ep", type=positive_int, default=1, help="expert-parallel degree (default 1)")
        group.add_argument(f"--{side}-attention-dp", action="store_true", help="attention data parallelism")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def add_workload_flags(parser: argparse.ArgumentParser) -> None:
    """The flags serve-estimate and serve-plan share."""
    what = parser.add_argument_group("model, hardware and requests")
    what.add_argument("--model", required=True, metavar="M", help="preset (meshplan list models) or config.json")
    what.add_argument("--cluster", required=True, metavar="C", help="cluster preset or JSON file")
    what.add_argument("--gpus", required=True, type=positive_int, metavar="N", help="GPUs")
    what.add_argument("--isl", required=True, type=positive_int, metavar="I", help="input (prompt) tokens per request")
    what.add_argument("--osl", required=True, type=positive_int, metavar="O", help="output tokens per request")
    what.add_argument("--precision", choices=("bf16", "fp8", "fp4"), default="bf16", help="weight precision (default bf16)")
    what.add_argument("--kv-dtype", choices=("bf16", "fp8"),
                      help="KV cache dtype (default: the engine's: bf16 with bf16 weights or, on vllm / sglang, a "
                           "checkpoint stating no KV quantisation (DeepSeek fp8, gpt-oss fp4); else fp8)")
    what.add_argument("--engine", choices=("vllm", "sglang", "trtllm"), default="vllm",
                      help="serving engine whose memory and batching defaults apply (default vllm)")


def run(args: argparse.Namespace) -> int:
    import planner
    from planner.intake.jsonio import dumps

    kwargs = {f"{side}_{k}": getattr(args, f"{side}_{k}") for side in ("prefill", "decode") for k in _DISAGG}
    result = planner.serve_estimate(model=args.model, cluster=args.cluster, gpus=args.gpus, isl=args.isl, osl=args.osl,
                                    tp=args.tp, pp=args.pp, ep=args.ep, attention_dp=args.attention_dp,
                                    concurrency=args.concurrency, precision=args.precision, kv_dtype=args.kv_dtype,
                                    engine=args.engine, **kwargs)
    if not result.fits:
        print(f"meshplan: {result.assumptions[0]}", file=sys.stderr)
        return EXIT_NO_PLAN
    if args.json:
        print(dumps(result.model_dump(), indent=2))
    else:
        from planner.cli._serving_view import estimate_lines

        print("\n".join(estimate_lines(result.model_dump())))
    return EXIT_OK
