"""Write what was measured as a cluster entry in the ``profiles`` format (``clusters.json`` entry with
an inline GPU object, the format ``meshplan --cluster FILE`` reads), with a citation for every number
and the raw rows under ``measurements``; and the comparison with the preset's assumptions.

Numbers a profile cannot measure (the preset's datasheet values, the compute slowdown under
concurrent communication, the training loop's fixed host time on a GPU node) are copied from the
preset and cited as such; ``meshplan calibrate`` fits the loop-level factors on measured runs.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from costmodel import comm
from costmodel.specs import ClusterSpec
from planner.runtime.profile.derive import fit_gemm_line, memory_numbers
from planner.runtime.profile.hardware import DeviceFacts
from planner.runtime.profile.links import MEASURED, link_fields
from planner.runtime.profile.measure import Measurements
from planner.runtime.profile.records import CollectivePoint
from profiles.entries import ClusterEntry, build_cluster
from profiles.errors import ProfileError




@dataclass(frozen=True)
class Row:
    """One line of the measured-vs-preset table."""

    quantity: str
    unit: str
    measured: float | None
    preset: float | None


@dataclass(frozen=True)
class ProfileResult:
    """The cluster file's object, the validated cluster, and the comparison with the preset."""

    entry: dict[str, Any]
    cluster: ClusterSpec
    rows: list[Row]
    preset_name: str | None
    preset_spec: ClusterSpec | None = None
    """The cluster compared with (None: a CPU without ``--preset``)."""


def build_result(name: str, facts: DeviceFacts, m: Measurements, preset: ClusterSpec | None) -> ProfileResult:
    """The cluster entry for ``m`` measured on ``facts`` (``preset``: the cluster to compare with and
    to take unmeasurable numbers from)."""
    sources: dict[str, str] = {}
    gpu = _gpu(facts, m, preset, sources)
    eff = _compute_efficiency(facts, m, gpu, preset, sources)
    fields = link_fields(facts, m, gpu, eff, preset, sources)
    links_eff = {k: fields.pop(k) for k in ("intra_node", "network", "step_fixed_s", "overlap_slowdown")}
    fields["memory_headroom_gib"] = _headroom(m, gpu, sources)
    entry = {
        "name": name,
        "source": f"{MEASURED} on {facts.name} x {m.world} ranks ({m.ranks_per_node} per node), torch {torch.__version__}",
        "gpu": gpu,
        **fields,
        "efficiency": {**eff, **links_eff},
        "sources": sources,
    }
    cluster = _validate(entry, name)
    measured = _with_model_times(m.collectives, cluster, m.ranks_per_node)
    entry["measurements"] = _measurements(facts, m, measured)
    return ProfileResult(entry=entry, cluster=cluster, rows=comparison(cluster, preset, facts, m),
                         preset_name=preset.name if preset else None, preset_spec=preset)


def _headroom(m: Measurements, gpu: dict[str, Any], sources: dict[str, str]) -> float:
    """``memory_headroom_gib``: the measured allocator reserve (``Measurements.headroom_fraction``)
    of the GPU's memory, or, on a CPU, ``costmodel.headroom.DEFAULT_HEADROOM_FRACTION`` of it."""
    from costmodel.headroom import DEFAULT_HEADROOM_FRACTION

    if m.headroom_fraction is None:
        sources["memory_headroom_gib"] = (f"not measured (no caching allocator on this device): the default "
                                          f"{DEFAULT_HEADROOM_FRACTION:.2%} of the memory (profiles/memory_headroom.json)")
        return round(DEFAULT_HEADROOM_FRACTION * gpu["hbm_gib"], 3)
    sources["memory_headroom_gib"] = (f"{MEASURED}: max_memory_reserved - max_memory_allocated over a synthetic training "
                                      f"step, {m.headroom_fraction:.2%} of its peak, times the GPU's memory "
                                      "(planner.runtime.profile.headroom)")
    return round(m.headroom_fraction * gpu["hbm_gib"], 3)


def _gpu(facts: DeviceFacts, m: Measurements, preset: ClusterSpec | None, sources: dict[str, str]) -> dict[str, Any]:
    """The inline GPU object: datasheet values where known, else first principles and measurements."""
    known = facts.device_type == "cuda" and preset is not None and facts.peak_tflops is not None
    base = preset.gpu.model_dump(exclude={"name", "source"}) if known else {}
    ceiling, _ = _gemm_fit(facts, m)
    peak = facts.peak_tflops or ceiling / 1e12
    sources["gpu.peak_bf16_tflops"] = facts.peak_source if facts.peak_tflops else f"{MEASURED}: GEMM ceiling (no datasheet)"
    if ceiling / 1e12 > peak:
        peak = ceiling / 1e12
        sources["gpu.peak_bf16_tflops"] = f"{MEASURED}: the measured GEMM ceiling, above the {facts.peak_source} estimate"
    memory_gbps = [p.gbps for p in m.memory]
    bandwidth, _ = memory_numbers(memory_gbps, preset.gpu.hbm_bandwidth_gbps if known else None)
    sources["gpu.hbm_gib"] = f"{MEASURED}: {'device capacity (torch.cuda)' if facts.device_type == 'cuda' else 'host RAM / ranks per node'}"
    sources["gpu.hbm_bandwidth_gbps"] = f"datasheet of preset '{preset.name}'" if known else f"{MEASURED}: best copy rate over {len(memory_gbps)} buffer sizes"
    for key in set(base) - {"peak_bf16_tflops", "hbm_gib", "hbm_bandwidth_gbps"}:
        sources[f"gpu.{key}"] = f"datasheet of preset '{preset.name}'"  # base is empty without a preset
    base.update(_mamf_fractions(facts, m, base, peak, sources))
    dtype = "bf16" if facts.device_type == "cuda" else "fp32 (the dtype meshplan trains in on CPU)"
    return {**base, "name": facts.gpu_key, "peak_bf16_tflops": round(peak, 6), "hbm_gib": round(facts.memory_gib, 3),
            "hbm_bandwidth_gbps": round(bandwidth, 3), "source": f"{facts.name}: {MEASURED}; peak in {dtype}"}


def _gemm_fit(facts: DeviceFacts, m: Measurements, dtype: str | None = None) -> tuple[float, float]:
    """(ceiling FLOP/s, F_half FLOPs) over the GEMMs of ``dtype`` (default: the compute dtype)."""
    name = dtype or str(facts.compute_dtype).removeprefix("torch.")
    points = [p for p in m.gemm if p.dtype == name]
    return fit_gemm_line([2.0 * p.m * p.n * p.k for p in points], [p.time_s for p in points])


def _mamf_fractions(facts: DeviceFacts, m: Measurements, base: dict[str, Any], peak: float, sources: dict[str, str]) -> dict[str, float]:
    """The measured GEMM ceilings over the datasheet peaks the FP8 model reads (``costmodel.precision``):
    ``bf16_mamf_fraction`` and, where FP8 GEMMs were timed and the GPU has an FP8 peak, ``fp8_mamf_fraction``."""
    if not base:
        return {}
    out = {"bf16_mamf_fraction": round(min(1.0, _gemm_fit(facts, m)[0] / (peak * 1e12)), 6)}
    sources["gpu.bf16_mamf_fraction"] = f"{MEASURED}: bf16 GEMM ceiling (fitted line) / datasheet peak"
    fp8 = [p for p in m.gemm if p.dtype.startswith("float8")]
    if fp8 and base.get("peak_fp8_tflops"):
        ceiling, _ = _gemm_fit(facts, m, fp8[0].dtype)
        out["fp8_mamf_fraction"] = round(min(1.0, ceiling / (base["peak_fp8_tflops"] * 1e12)), 6)
        sources["gpu.fp8_mamf_fraction"] = f"{MEASURED}: {fp8[0].dtype} GEMM ceiling (torch._scaled_mm, fitted line) / datasheet FP8 peak"
    return out


def _compute_efficiency(facts: DeviceFacts, m: Measurements, gpu: dict[str, Any], preset: ClusterSpec | None, sources: dict[str, str]) -> dict[str, float]:
    """gemm_max, gemm_half_gflop, attention, memory, kernel_overhead_us from the measurements."""
    ceiling, half = _gemm_fit(facts, m)
    peak = gpu["peak_bf16_tflops"] * 1e12
    default = [p.efficiency * (facts.peak_tflops or 1.0) * 1e12 / peak for p in m.attention if p.backend == "default"]
    known = facts.device_type == "cuda" and preset is not None and facts.peak_tflops is not None
    _, memory = memory_numbers([p.gbps for p in m.memory], gpu["hbm_bandwidth_gbps"] if known else None)
    n_gemm = sum(1 for p in m.gemm if p.dtype == str(facts.compute_dtype).removeprefix("torch."))
    sources.update({
        "efficiency.gemm_max": f"{MEASURED}: ceiling of t = (F + F_half)/ceiling fitted on {n_gemm} transformer-layer GEMMs / peak",
        "efficiency.gemm_half_gflop": f"{MEASURED}: F_half of the same fit (costmodel.kernels.gemm_time)",
        "efficiency.attention": f"{MEASURED}: median over {len(default)} causal SDPA forward+backward shapes, normalised to head dim 128",
        "efficiency.memory": f"{MEASURED}: median copy rate / {'datasheet bandwidth' if known else 'best copy rate'}",
        "efficiency.kernel_overhead_us": f"{MEASURED}: one tiny elementwise kernel, back to back",
    })
    return {
        "gemm_max": round(min(1.0, ceiling / peak), 6),
        "gemm_half_gflop": round(max(half / 1e9, 1e-6), 6),
        "attention": round(min(1.0, max(statistics.median(default), 1e-4)), 6) if default else (preset.efficiency.attention if preset else 0.5),
        "memory": round(memory, 6),
        "kernel_overhead_us": round(m.kernel_overhead_s * 1e6, 3),
    }


def _validate(entry: dict[str, Any], name: str) -> ClusterSpec:
    """The entry through the loader's own validation (what ``--cluster FILE`` will do)."""

    def no_named_gpu(gpu: str, where: str) -> Any:
        raise ProfileError(f"{where}: the profile writes its GPU inline, not '{gpu}'")

    built: ClusterEntry = build_cluster(entry, f"profile '{name}'", name, no_named_gpu)
    return built.spec


def _with_model_times(points: list[CollectivePoint], cluster: ClusterSpec, per_node: int) -> list[CollectivePoint]:
    """Each measured collective with what ``costmodel.comm`` predicts for it on the written cluster."""
    out = []
    for p in points:
        across = p.scope == "inter_node"
        group = comm.Group(size=p.ranks, per_node=1 if across else p.ranks)
        model = {
            "all_reduce": lambda: comm.all_reduce(cluster, group, p.bytes),
            "all_gather": lambda: comm.all_gather(cluster, group, p.bytes),
            "reduce_scatter": lambda: comm.reduce_scatter(cluster, group, p.bytes),
            "all_to_all": lambda: comm.all_to_all(cluster, group, p.bytes),
            "send_recv": lambda: comm.send_recv(cluster, p.bytes, across),
        }[p.op]()
        out.append(p.model_copy(update={"model_s": model}))
    return out


def _measurements(facts: DeviceFacts, m: Measurements, collectives: list[CollectivePoint]) -> dict[str, Any]:
    """The raw rows, JSON-ready."""
    return {
        "device": {"type": facts.device_type, "name": facts.name, "peak_tflops_first_principles": facts.peak_tflops,
                   "peak_source": facts.peak_source, "world_size": m.world, "ranks_per_node": m.ranks_per_node,
                   "host": os.uname().nodename, "torch": torch.__version__, "wall_s": round(m.wall_s, 3)},
        "kernel_overhead_s": m.kernel_overhead_s,
        "step_sync_s": m.step_sync_s,
        "gemm": [p.model_dump() for p in m.gemm],
        "attention": [p.model_dump() for p in m.attention],
        "memory": [p.model_dump() for p in m.memory],
        "collectives": [p.model_dump() for p in collectives],
    }


def comparison(cluster: ClusterSpec, preset: ClusterSpec | None, facts: DeviceFacts, m: Measurements) -> list[Row]:
    """Measured (the written cluster) vs the preset's assumption, quantity by quantity."""

    def both(label: str, unit: str, fn: Any, measured: bool = True) -> Row:
        return Row(label, unit, fn(cluster) if measured else None, fn(preset) if preset else None)

    scopes = {p.scope for p in m.collectives}
    peak_preset = preset.gpu.peak_bf16_tflops if preset else facts.peak_tflops
    rows = [
        Row("peak", "TFLOP/s", cluster.gpu.peak_bf16_tflops, peak_preset),
        both("GEMM ceiling", "TFLOP/s", lambda c: c.gpu.peak_bf16_tflops * c.efficiency.gemm_max),
        both("GEMM half-efficiency size", "GFLOP", lambda c: c.efficiency.gemm_half_gflop),
        both("attention (head dim 128)", "TFLOP/s", lambda c: c.gpu.peak_bf16_tflops * c.efficiency.attention, bool(m.attention)),
        both("memory-bound kernels", "GB/s", lambda c: c.gpu.hbm_bandwidth_gbps * c.efficiency.memory),
        both("kernel overhead", "us", lambda c: c.efficiency.kernel_overhead_us),
        both("intra-node busbw", "GB/s", lambda c: c.intra_node_bandwidth_gbps * c.efficiency.intra_node, "intra_node" in scopes),
        both("intra-node hop latency", "us", lambda c: c.intra_node_latency_us, "intra_node" in scopes),
        both("network busbw", "GB/s", lambda c: c.network_bandwidth_gbps * c.efficiency.network, "inter_node" in scopes),
        both("network hop latency", "us", lambda c: c.network_latency_us, "inter_node" in scopes),
        both("step fixed time", "s", lambda c: c.efficiency.step_fixed_s),
    ]
    if any(p.dtype.startswith("float8") for p in m.gemm) and cluster.gpu.peak_fp8_tflops:
        rows.insert(2, both("FP8 GEMM ceiling", "TFLOP/s", lambda c: (c.gpu.peak_fp8_tflops or 0) * (c.gpu.fp8_mamf_fraction or 1.0)))
    return rows

