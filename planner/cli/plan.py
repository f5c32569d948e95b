"""``meshplan plan``: search the fastest plan that fits and write the plan JSON.

The plan file is written atomically (a temporary file in the same directory, then a rename), and only
once the search has produced a plan that the validator accepts: on any error, and when nothing fits
(exit 3, the nearest miss on one stderr line), no file is written. stdout carries the summary, or the
plan JSON alone with ``--json``; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from planner.cli._common import EXIT_OK, UsageError, add_subparser, check_output, positive_int, stdout_to_stderr, write_output

_EXAMPLES = """\
  meshplan plan --model gpt3-175b --cluster dgx-a100 --gpus 1024 \\
      --global-batch 1536 --seq-len 2048 --target megatron -o plan.json
  meshplan plan --model llama3.1-8b --cluster dgx-h100 --gpus 64 \\
      --global-batch 512 --seq-len 8192 --json > plan.json
  meshplan plan --model path/to/config.json --cluster my_cluster.json --gpus 16 \\
      --global-batch 64 --seq-len 4096 --time-limit 10 --top-k 5 -o plan.json
  meshplan plan --model llama3.1-70b --cluster dgx-h100 --gpus 64 --global-batch 512 \\
      --seq-len 8192 --tp 8 --pp 1..4 --zero 1 --recompute selective -o plan.json"""

_DESCRIPTION = """\
Search data, tensor (with or without sequence), pipeline (non-uniform stage splits, interleaving,
schedules), context and expert parallelism, ZeRO sharding, per-layer recomputation and micro-batch
size for the fastest step that fits in memory, as the target engine can express it. The plan records
the top-k runners-up, why each lost, and how sure the search is (status, optimality gap).
MODEL is a preset name (meshplan list models), a Hugging Face config.json, or
path/to/file.py:factory / package.module:factory returning a torch.nn.Module.
CLUSTER is a preset name (meshplan list clusters) or a cluster JSON file."""

PROGRESS_AFTER_S = 1.0
"""Searches shorter than this show no progress display."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = add_subparser(subparsers, "plan", "search the fastest plan that fits and write it", _DESCRIPTION, _EXAMPLES)
    what = parser.add_argument_group("model, hardware and batch")
    what.add_argument("--model", metavar="M", required=True, help="preset, config.json or module factory")
    what.add_argument("--trace", action="store_true", help="build a config.json model with transformers on the meta device and trace it")
    what.add_argument("--cluster", metavar="C", required=True,
                      help="cluster preset or JSON file, or GPU groups in order: C:N[,C:N...] (e.g. dgx-h100:16,dgx-a100:32) or a groups JSON file")
    what.add_argument("--gpus", metavar="N", type=positive_int, required=True, help="number of GPUs")
    what.add_argument("--global-batch", metavar="B", type=positive_int, required=True, help="sequences per optimizer step")
    what.add_argument("--seq-len", metavar="S", type=positive_int, required=True, help="tokens per sequence")
    what.add_argument("--slow", metavar="GPU=SPEED", action="append",
                      help="a slow GPU (5=0.5) or node (node:2=0.7), speed in (0, 1]; comma-joined or repeated; GPUs and nodes numbered across the groups")
    what.add_argument("--down", metavar="node:N", action="append", help="a node that is gone (node:3); comma-joined or repeated")
    how = parser.add_argument_group("search")
    how.add_argument("--target", choices=("native", "megatron", "torchtitan", "deepspeed"), default="native",
                     help="restrict the plan to what this engine can express (default native: everything)")
    how.add_argument("--precision", choices=("bf16", "fp8"), default="bf16",
                     help="GEMM precision of the blocks' projections (fp8: Transformer Engine / torchao FP8, MXFP8 on Blackwell; needs FP8 tensor cores)")
    how.add_argument("--compile", action=argparse.BooleanOptionalAction,
                     help="fused elementwise kernels: torch.compile for torchtitan (default off there; also allows async TP), "
                          "--no-compile for unfused code (default: the target engine's)")
    how.add_argument("--top-k", metavar="K", type=_non_negative_int, default=3, help="runners-up to record (default 3)")
    how.add_argument("--time-limit", metavar="SEC", type=_positive_float,
                     help="stop after SEC seconds with the best plan so far and its optimality gap")
    how.add_argument("--memory-headroom", metavar="GIB", type=_non_negative_float,
                     help="GiB per GPU to keep free beyond the cost model's estimate (default: the cluster file's "
                          "memory_headroom_gib, or 1.21 %% of the GPU's memory, measured)")
    add_constraint_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="PLAN_JSON", help="write the plan here (atomically)")
    out.add_argument("--json", action="store_true", help="print the plan JSON on stdout instead of the summary")
    out.add_argument("--report", metavar="FILE", help="also write the report here: .html (one self-contained page) or .md")
    out.add_argument("--timing", action="store_true",
                     help="record the search wall time in the plan (plans are otherwise byte-identical for the same inputs)")
    parser.set_defaults(run=run)


_CONSTRAINED = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch")


def constraint_values(args: argparse.Namespace) -> dict[str, Any]:
    """The values of :func:`add_constraint_flags`' flags, by ``planner.plan`` keyword."""
    return {name: getattr(args, name) for name in (*_CONSTRAINED, "sp", "recompute", "schedule")}


def add_constraint_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that fix or bound a dimension; the search explores the others (``plan`` and ``sweep``)."""
    fix = parser.add_argument_group("constraints (fix a value, or bound it as LO..HI, LO.. or ..HI; the rest is searched)")
    for name, what in (("tp", "tensor-parallel degree"), ("pp", "pipeline-parallel degree"), ("cp", "context-parallel degree"),
                       ("dp", "data-parallel degree"), ("ep", "expert-parallel degree"), ("vpp", "virtual stages per pipeline rank"),
                       ("zero", "ZeRO stage (0-3)"), ("micro_batch", "sequences per micro-batch")):
        fix.add_argument("--" + name.replace("_", "-"), metavar="N|LO..HI", help=what)
    fix.add_argument("--sp", action=argparse.BooleanOptionalAction, help="sequence parallelism on (needs tp > 1) or off")
    fix.add_argument("--recompute", choices=("none", "selective", "full"), help="one recompute mode for every layer")
    fix.add_argument("--schedule", choices=("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"), help="pipeline schedule")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got '{text}'")
    return value


def _finite_float(text: str, *, zero: bool, unit: str) -> float:
    """``text`` as a finite number above 0 (or at least 0 with ``zero``), else argparse's error."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a {'non-negative' if zero else 'positive'} number of {unit}, got '{text}'")
    return value


def _positive_float(text: str) -> float:
    return _finite_float(text, zero=False, unit="seconds")


def _non_negative_float(text: str) -> float:
    return _finite_float(text, zero=True, unit="GiB")


def run(args: argparse.Namespace) -> int:
    """Search, validate (inside ``planner.plan``), write and summarise; errors leave for ``main``."""
    if args.output is not None and args.output != "-":
        check_output(args.output, "-o")
    if args.report is not None:
        check_output(args.report, "--report")
        if Path(args.report).suffix not in (".html", ".htm", ".md"):
            raise UsageError(f"plan: --report {args.report} must end in .html or .md (the report's format)")
    from planner.outputs.report import render_report
    from planner.plans.route import plan as make_plan  # deferred: the search is not needed for --help

    progress = SearchProgress()
    try:
        with stdout_to_stderr():  # a factory's prints, a solver's banner: stdout carries the result alone
            plan = make_plan(model=args.model, cluster=args.cluster, gpus=args.gpus, global_batch=args.global_batch,
                             seq_len=args.seq_len, target=args.target, precision=args.precision, compile=args.compile, top_k=args.top_k, time_limit_s=args.time_limit,
                             memory_headroom_gib=args.memory_headroom, timing=args.timing, trace=args.trace, progress=progress,
                             slow=args.slow, down=args.down, **constraint_values(args))
    finally:
        progress.close()
    print(f"meshplan: searched in {time.perf_counter() - progress.start:.1f} s ({plan.search.status})", file=sys.stderr)
    text = plan.to_json()
    if args.output is not None and args.output != "-":
        write_output(args.output, text, "-o")
        print(f"meshplan: wrote {args.output}", file=sys.stderr)
    if args.report is not None:
        fmt = "md" if args.report.endswith(".md") else "html"
        write_output(args.report, render_report(plan, fmt), "--report")
        print(f"meshplan: wrote {args.report}", file=sys.stderr)
    if args.json or args.output == "-":
        sys.stdout.write(text)
    else:
        sys.stdout.write(summary_text(plan))
    return EXIT_OK


def summary_text(plan: Any) -> str:
    """A few lines for a person: the plan, its predicted speed and memory, the search facts."""
    from planner.plans.build import summary

    est, s, search = plan.estimate, plan.schedule, plan.search
    sizes = [len(st.layers) for st in plan.stages]
    gap = f", gap {search.optimality_gap:.2%}" if search.optimality_gap else ""
    lines = [
        f"plan ({plan.request.target}): {summary(plan.config)}",
        f"step {est.step_time_s:.4g} s | {est.tokens_per_s:,.0f} tokens/s | MFU {est.mfu:.1%} | "
        f"{est.peak_memory_gib:.1f} of {est.memory_capacity_gib:.1f} GiB per GPU",
        f"pipeline: {len(sizes)} chunk{'s' if len(sizes) != 1 else ''} of {sizes} layers, "
        f"{s.num_microbatches} micro-batch{'es' if s.num_microbatches != 1 else ''} of {s.micro_batch}",
        f"search: {search.status}{gap}, {search.candidates_evaluated:,} evaluated, "
        f"{search.candidates_pruned:,} pruned, {search.solver}",
    ]
    lines += [f"  alternative {a.rank}: {a.summary}: {a.why_lost}" for a in plan.alternatives]
    if plan.hetero is not None:
        from planner.outputs.report.hetero import replica_lines
        from planner.plans.hetero.gain import gain_lines

        lines += replica_lines(plan) + gain_lines(plan.hetero.baselines)
    return "\n".join(lines) + "\n"


class SearchProgress:
    """Progress callback for ``planner.plan``: a transient rich bar on a terminal's stderr, shown
    only once the search has run for ``PROGRESS_AFTER_S``."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if time.perf_counter() - self.start < PROGRESS_AFTER_S or not sys.stderr.isatty():
                return
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("searching mesh options", total=total)
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        """Remove the bar, if one was shown."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
