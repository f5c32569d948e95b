"""``meshplan profile``: measure this cluster with torch microbenchmarks and write a cluster file.

Every rank (``torchrun``) measures; rank 0 writes the file atomically and prints the table of
measured values against the preset's assumptions and a chart of all-reduce bus bandwidth by size.
The progress bar goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from planner.cli._common import EXIT_OK, UsageError, add_subparser

_EXAMPLES = """\
  torchrun --nproc-per-node 8 -m cli profile -o my_cluster.json
  torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m cli profile --sizes 4KiB..1GiB -o two_nodes.json
  torchrun --standalone --nproc-per-node 4 -m cli profile --device cpu -o cpu_cluster.json
  meshplan profile --device cpu --quick -o laptop.json      # one process: compute and memory only
  meshplan plan --model llama3.1-8b --cluster my_cluster.json --gpus 16 --global-batch 256 --seq-len 8192"""

_DESCRIPTION = """\
Measure GEMMs at transformer-layer shapes (bf16, fp8 where the GPU has it; fp32 on CPU), causal
attention per SDPA backend, memory bandwidth, kernel overhead, and all-reduce / all-gather /
reduce-scatter / all-to-all / send-recv inside a node and across nodes, then write a cluster JSON
(the format --cluster reads) with the measured ceilings and efficiencies, a citation for each number
and the raw measurements. Start it with torchrun, one process per GPU (per CPU "GPU" with --device
cpu, gloo); a single process measures compute and memory only. Compared with --preset (default: the
GPU's node preset)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``profile`` subcommand."""
    parser = add_subparser(subparsers, "profile", "measure this cluster and write a cluster JSON", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="cluster JSON to write (rank 0)")
    parser.add_argument("--device", choices=("cuda", "cpu"), help="device to measure (default: cuda when visible, else cpu)")
    parser.add_argument("--sizes", metavar="SPEC", help="collective buffer sizes: MIN..MAX (powers of 4) or a list, e.g. 4KiB..1GiB or 1KiB,1MiB")
    parser.add_argument("--hidden", metavar="H,...", help="hidden sizes whose layer GEMMs to time (default per device)")
    parser.add_argument("--seq-lens", metavar="S,...", help="attention sequence lengths (default per device)")
    parser.add_argument("--preset", metavar="C", help="cluster preset or file to compare with and take unmeasured numbers from")
    parser.add_argument("--name", help="the cluster's name (default: the output file's stem)")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and sizes (a first look, tests)")
    parser.add_argument("--json", action="store_true", help="print the written cluster object as JSON instead of the tables")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Measure on every rank; rank 0 writes and prints."""
    from planner.cli._cluster_out import check_target, write_cluster_file

    check_target(args.output)
    options = _options(args)
    import torch.distributed as dist

    from planner.runtime.oom import oom_answered
    from planner.runtime.profile import check_device, init_process_group_from_env, profile_cluster

    check_device(options.device)
    created = init_process_group_from_env(options.device)
    try:
        leader = not dist.is_initialized() or dist.get_rank() == 0
        rank = dist.get_rank() if dist.is_initialized() else 0
        with _progress(leader) as progress, oom_answered("profile", rank, flags=_OOM_FLAGS):
            result = profile_cluster(options, name=args.name or Path(args.output).stem, preset=args.preset, progress=progress)
        if leader:
            write_cluster_file(args.output, result.entry)
            _show(args, result)
    finally:
        if created:
            dist.destroy_process_group()
    return EXIT_OK


_OOM_FLAGS = ["--quick", "smaller --hidden", "smaller --seq-lens", "smaller --sizes"]
"""What shrinks a profile's buffers when a GPU runs out of memory (``planner.runtime.oom``)."""


def _options(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Device defaults with the flags applied."""
    import dataclasses

    import torch

    from planner.runtime.profile import default_options, parse_sizes
    from planner.runtime.profile.options import parse_ints

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    options = default_options(device, quick=args.quick)
    changes = {}
    if args.sizes is not None:  # '' is a mistake, not the default
        changes["collective_bytes"] = parse_sizes(args.sizes)
    if args.hidden is not None:
        changes["hidden_sizes"] = parse_ints(args.hidden, "--hidden")
    if args.seq_lens is not None:
        changes["attention_seq_lens"] = parse_ints(args.seq_lens, "--seq-lens")
    options = dataclasses.replace(options, **changes)
    _check_memory(options)
    return options


def _check_memory(options) -> None:  # type: ignore[no-untyped-def]
    """Refuse sizes whose buffers could not be allocated: the largest buffer set of a GEMM (fp32
    operands, staged before the cast), of an attention call (the score matrix of the math kernel)
    or of a collective, against half of the device's memory (of the host, for ``cpu``)."""
    from planner.runtime.profile import check_device

    check_device(options.device)  # before asking CUDA for its memory
    for flag, values in (("--hidden", options.hidden_sizes), ("--seq-lens", options.attention_seq_lens), ("--sizes", options.collective_bytes)):
        if max(values) > 2**40:
            raise UsageError(f"profile: {flag} holds a size of about 2^{max(values).bit_length() - 1}, beyond any device; give smaller sizes")
    budget = _device_bytes(options.device) // 2
    needs = {
        "--hidden": max(4 * (options.tokens * h + 4 * h * h + 4 * options.tokens * h) for h in options.hidden_sizes),
        "--seq-lens": max(4 * options.attention_heads * max(1, options.attention_tokens // s) * (s * s + 4 * s * max(options.attention_head_dims))
                          for s in options.attention_seq_lens),
        "--sizes": 3 * max(options.collective_bytes),
    }
    for flag, need in needs.items():
        if need > budget:
            raise UsageError(f"profile: {flag} asks for buffers of about {need / 2**30:,.1f} GiB, over the {budget / 2**30:,.1f} GiB "
                             f"(half the {options.device} memory) a profile may take; give smaller sizes")


def _device_bytes(device: str) -> int:
    """Memory of this rank's device: the GPU's, or the host's physical memory for ``cpu``."""
    if device == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


class _progress:
    """A rich progress bar on stderr for rank 0 when stderr is a terminal (a no-op elsewhere, so logs
    stay clean); yields the callback."""

    def __init__(self, leader: bool) -> None:
        self.bar = None
        if leader and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description:<40}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)

    def __enter__(self):  # type: ignore[no-untyped-def]
        if self.bar is None:
            return None
        self.bar.start()
        task = self.bar.add_task("profiling", total=None)

        def update(done: int, total: int, label: str) -> None:
            self.bar.update(task, completed=done, total=total, description=label[:40])  # type: ignore[union-attr]

        return update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _show(args: argparse.Namespace, result) -> None:  # type: ignore[no-untyped-def]
    """The written cluster as JSON, or the comparison table and the bandwidth chart."""
    if args.json:
        print(json.dumps(result.entry, indent=2))
        return
    from planner.cli._profile_view import print_profile

    print_profile(result, args.output)
    sys.stdout.flush()
