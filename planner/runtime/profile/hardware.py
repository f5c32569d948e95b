"""What the profiled device is: its name, the dtype training computes in, its peak and its memory.

A GPU's peak comes from its datasheet entry in ``profiles/gpus.json`` (matched by the name CUDA
reports). A CPU has no datasheet entry: its "GPU" is one process, and its peak is the first-principles
FMA rate of the cores that process may use, cores x clock x FLOPs per cycle, with FLOPs per cycle from
the vector ISA (two FMA pipes x lanes x 2 FLOP: 32 fp32 FLOP/cycle with AVX2+FMA, 64 with AVX-512F;
Intel 64 and IA-32 Optimization Reference Manual, "Floating-point throughput"; Agner Fog,
"The microarchitecture of Intel, AMD and VIA CPUs", Zen / Skylake FMA units). On CPU meshplan trains
in fp32 (bf16 GEMMs without AVX-512-BF16/AMX are emulated and far slower), so fp32 is the compute dtype
and the peak is the fp32 peak.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

GIB = 1024**3


@dataclass(frozen=True)
class DeviceFacts:
    """The device one rank measures, as the cluster file will describe it."""

    device_type: str
    """``cpu`` or ``cuda``."""
    name: str
    """Device name as reported (CUDA device name, or the CPU model name)."""
    gpu_key: str
    """Name of the GPU entry: a ``profiles/gpus.json`` key, or ``cpu-<model>`` for a CPU."""
    compute_dtype: torch.dtype
    """The dtype training computes in on this device (bf16 on GPUs, fp32 on CPUs)."""
    gemm_dtypes: tuple[torch.dtype, ...]
    """Dtypes whose GEMMs are measured (compute dtype first; fp8 where the device has it)."""
    peak_tflops: float | None
    """Dense peak in ``compute_dtype``, TFLOP/s; None when unknown (an unlisted GPU)."""
    peak_source: str
    memory_gib: float
    """Memory one rank may use: the GPU's capacity, or the host's RAM over the ranks on the node."""
    ranks_per_node: int


def device_facts(device: torch.device, ranks_per_node: int) -> DeviceFacts:
    """Facts about ``device`` as seen from one of ``ranks_per_node`` ranks on this node."""
    if device.type == "cuda":
        return _cuda_facts(device, ranks_per_node)
    return _cpu_facts(ranks_per_node)


def _cuda_facts(device: torch.device, ranks_per_node: int) -> DeviceFacts:
    """A GPU: its datasheet entry when profiles knows it, else only what CUDA reports."""
    from profiles import ProfileError, load_gpu

    name = torch.cuda.get_device_name(device)
    props = torch.cuda.get_device_properties(device)
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16,)
    if (props.major, props.minor) >= (8, 9) and hasattr(torch, "float8_e4m3fn"):
        dtypes += (torch.float8_e4m3fn,)
    try:
        gpu = load_gpu(name)
        key, peak, source = gpu.name, gpu.peak_bf16_tflops, f"datasheet entry '{gpu.name}' of profiles/gpus.json"
    except ProfileError:
        key, peak, source = "-".join(name.lower().split()), None, "unknown GPU: no datasheet peak"
    return DeviceFacts("cuda", name, key, torch.bfloat16, dtypes, peak, source, props.total_memory / GIB, ranks_per_node)


def _cpu_facts(ranks_per_node: int) -> DeviceFacts:
    """A CPU process: fp32, first-principles peak over the cores it may use, RAM shared by the node's ranks."""
    name, mhz, flags = _cpuinfo()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    per_rank = max(1.0, min(float(torch.get_num_threads()), cores / max(1, ranks_per_node)))
    per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 16 if "avx" in flags else 8
    peak = per_rank * mhz * 1e6 * per_cycle / 1e12 if mhz else None
    source = (
        f"first principles: {per_rank:g} cores x {mhz:.0f} MHz x {per_cycle} fp32 FLOP/cycle "
        f"({'AVX-512F' if per_cycle == 64 else 'AVX2+FMA' if per_cycle == 32 else 'AVX/SSE'}: 2 FMA pipes x lanes x 2)"
    )
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    if _cpu_has_fast_bf16():
        dtypes += (torch.bfloat16,)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB / max(1, ranks_per_node)
    key = "cpu-" + "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())
    return DeviceFacts("cpu", name, key, torch.float32, dtypes, peak, source, memory, ranks_per_node)


def _cpuinfo() -> tuple[str, float, set[str]]:
    """(model name, clock MHz, ISA flags) from ``/proc/cpuinfo``; empty values where absent."""
    name, mhz, flags = "cpu", 0.0, set()
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return name, mhz, flags
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "model name" and name == "cpu":
            name = value
        elif key == "cpu MHz":
            mhz = max(mhz, float(value or 0))
        elif key == "flags" and not flags:
            flags = set(value.split())
    return name, mhz, flags


def _cpu_has_fast_bf16() -> bool:
    """oneDNN runs bf16 natively (AVX-512-BF16 / AMX); otherwise bf16 GEMMs are not worth measuring."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check and check())
