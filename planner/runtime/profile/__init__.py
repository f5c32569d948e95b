"""``meshplan profile``: measure a cluster with torch microbenchmarks and write it as a cluster file.

Run under ``torchrun`` (one process per GPU, or per CPU "GPU"), or as one process: GEMMs at
transformer-layer shapes (bf16, and fp8 where the GPU has it; fp32 on CPU), causal SDPA attention
per backend, memory bandwidth, the fixed cost of a kernel, and the collectives of the process group
inside a node and across nodes (``collectives``). ``derive`` turns them into the numbers the cost
model reads, ``cluster_file`` into a ``profiles``-format cluster JSON with the raw rows beside them.

    from planner.runtime.profile import default_options, profile_cluster
    result = profile_cluster(default_options("cpu"), name="my-cpu")
    result.entry   # the cluster file's JSON object; result.rows: measured vs the preset
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from planner.errors import InputError
from planner.runtime.profile.cluster_file import ProfileResult, Row
from planner.runtime.profile.hardware import device_facts
from planner.runtime.profile.measure import Measurements, Progress, measure
from planner.runtime.profile.options import ProfileOptions, default_options, parse_sizes

__all__ = [
    "Measurements", "ProfileOptions", "ProfileResult", "Progress", "Row",
    "check_device", "default_options", "init_process_group_from_env", "parse_sizes", "profile_cluster",
]


def init_process_group_from_env(device_type: str) -> bool:
    """Join the process group ``torchrun`` describes (``WORLD_SIZE`` etc.) unless one exists: NCCL for
    CUDA, gloo for CPU. Returns True when this call created it (the caller destroys it)."""
    if dist.is_initialized() or "WORLD_SIZE" not in os.environ or "MASTER_ADDR" not in os.environ:
        return False
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return True


def profile_cluster(options: ProfileOptions, *, name: str, preset: str | None = None, progress: Progress | None = None) -> ProfileResult:
    """Measure this rank's device and the process group (every rank calls it) and build the cluster.

    ``preset``: the cluster to compare with and to take unmeasurable numbers from (a preset name or
    cluster file); by default the GPU's default node preset, none for a CPU. Raises InputError when the
    device is not there or the ranks do not fill whole nodes.
    """
    from planner.intake.arguments import resolve_cluster_arg
    from planner.runtime.profile.cluster_file import build_result

    device = check_device(options.device)
    world = dist.get_world_size() if dist.is_initialized() else 1
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world)) if dist.is_initialized() else 1
    if world % per_node:
        raise InputError(f"{world} ranks do not fill nodes of {per_node} (LOCAL_WORLD_SIZE): start the same number on every node")
    facts = device_facts(device, per_node)
    preset_spec = resolve_cluster_arg(preset) if preset else _default_preset(facts.device_type, facts.gpu_key)
    return build_result(name, facts, measure(options, facts, device, progress), preset_spec)


def check_device(device_type: str) -> torch.device:
    """This rank's device; InputError when CUDA is asked for and absent."""
    if device_type == "cuda":
        if not torch.cuda.is_available():
            raise InputError("--device cuda: no CUDA device is visible to torch here; use --device cpu")
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if device_type != "cpu":
        raise InputError(f"--device must be cuda or cpu, not '{device_type}'")
    return torch.device("cpu")


def _default_preset(device_type: str, gpu_key: str):  # type: ignore[no-untyped-def]
    """The GPU's default node preset (``profiles.cluster_for_gpu``); None for a CPU or an unknown GPU."""
    if device_type != "cuda":
        return None
    from profiles import ProfileError, cluster_for_gpu

    try:
        return cluster_for_gpu(gpu_key)
    except ProfileError:
        return None
