"""``meshplan list models|gpus|clusters``: the presets ``--model`` and ``--cluster`` accept.

A rich table on a terminal; plain aligned text when stdout is a pipe or a file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from planner.cli._common import EXIT_OK, add_subparser

_EXAMPLES = """\
  meshplan list models
  meshplan list gpus
  meshplan list clusters | grep h100
  meshplan list clusters --cluster dgx-h100:16,dgx-a100:32 --slow 5=0.5 --down node:3"""

_DESCRIPTION = """\
List the model presets (for --model), the GPU datasheets, or the cluster presets (for --cluster).
Prints a table on a terminal and plain aligned columns when piped."""

Rows = tuple[str, list[str], list[list[str]]]
"""A table to print: title, column headers, rows of cells."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``list`` subcommand."""
    parser = add_subparser(subparsers, "list", "list model, GPU and cluster presets", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("what", choices=sorted(_LISTERS), help="what to list")
    parser.add_argument("--cluster", metavar="C:N,C:N", help="clusters: show the GPU groups of this cluster (groups or a groups JSON file)")
    parser.add_argument("--slow", metavar="GPU=SPEED", action="append", help="with --cluster: slow GPUs (5=0.5) or nodes (node:2=0.7)")
    parser.add_argument("--down", metavar="node:N", action="append", help="with --cluster: nodes that are gone")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the table of ``args.what``."""
    from planner.cli._tables import print_table

    if args.cluster is not None or args.slow or args.down:
        if args.what != "clusters" or args.cluster is None:
            from planner.cli._common import UsageError

            raise UsageError("list: --cluster, --slow and --down go with 'list clusters --cluster C:N,C:N'")
        from planner.cli._groups_view import group_rows

        print_table(*group_rows(args.cluster, args.slow, args.down))
        return EXIT_OK
    print_table(*_LISTERS[args.what]())
    return EXIT_OK


def model_rows() -> Rows:
    """Every model preset with its shape and parameter count."""
    from planner.intake.models import list_presets, model_summary, resolve_model

    headers = ["name", "params", "layers", "hidden", "heads/kv", "ffn", "vocab", "experts", "description"]
    rows = []
    for name, description in list_presets():
        info = model_summary(resolve_model(name))
        experts = f"{info['num_experts']} top-{info['moe_top_k']}" if info["num_experts"] else "-"
        heads = f"{info['num_heads']}/{info['num_kv_heads']}"
        sizes = [str(info[key]) for key in ("layers", "hidden_size")]
        params = f"{info['total_params'] / 1e9:.1f}B"
        shape = [heads, str(info["ffn_hidden_size"]), str(info["vocab_size"])]
        rows.append([name, params, *sizes, *shape, experts, description])
    return "model presets (--model)", headers, rows


def gpu_rows() -> Rows:
    """Every GPU datasheet: peak dense BF16, memory, bandwidth."""
    from profiles import list_gpus

    headers = ["name", "bf16 TFLOP/s", "HBM GiB", "HBM GB/s", "source"]
    rows = [
        [gpu.name, f"{gpu.peak_bf16_tflops:g}", f"{gpu.hbm_gib:g}", f"{gpu.hbm_bandwidth_gbps:g}", gpu.source]
        for gpu in list_gpus()
    ]
    return "GPUs", headers, rows


def cluster_rows() -> Rows:
    """Every cluster preset: its GPU, node size and links."""
    from profiles import list_clusters

    headers = ["name", "gpu", "GiB/GPU", "gpus/node", "intra-node GB/s", "network GB/s per GPU", "source"]
    rows = [
        [
            cluster.name,
            cluster.gpu.name,
            f"{cluster.gpu.hbm_gib:g}",
            str(cluster.gpus_per_node),
            f"{cluster.intra_node_bandwidth_gbps:g}",
            f"{cluster.network_bandwidth_gbps:g}",
            cluster.source,
        ]
        for cluster in list_clusters()
    ]
    return "cluster presets (--cluster)", headers, rows


_LISTERS: dict[str, Callable[[], Rows]] = {"models": model_rows, "gpus": gpu_rows, "clusters": cluster_rows}
