"""The link side of a profiled cluster: bandwidth, per-hop latency and busbw efficiency inside a node
and across nodes, and the step's fixed synchronisation time.

Inside a node the link is the GPU's NVLink (its datasheet rate from the preset) or, for CPU ranks,
shared memory through gloo, whose "link rate" is the best busbw any collective reached; the
efficiency and latency then follow from the all-reduce curve (``derive.fit_link``). A scope that was
not measured (one node: no network; one process: no collectives) keeps the preset's numbers, or
without a preset the nearest measured ones, and says so in its citation.
"""

from __future__ import annotations

from typing import Any

from costmodel.specs import ClusterSpec, EfficiencySpec
from planner.runtime.profile.derive import LINK_OPS, fit_link
from planner.runtime.profile.hardware import DeviceFacts
from planner.runtime.profile.measure import Measurements
from planner.runtime.profile.records import CollectivePoint

MEASURED = "measured by meshplan profile"
NOT_MEASURED = "[not measured]"


def link_fields(facts: DeviceFacts, m: Measurements, gpu: dict[str, Any], eff: dict[str, float],
                preset: ClusterSpec | None, sources: dict[str, str]) -> dict[str, Any]:
    """ClusterSpec link fields plus the link-side efficiencies (``intra_node``, ``network``,
    ``step_fixed_s``, ``overlap_slowdown``), citing each in ``sources``."""
    base = _base_spec(facts, m, gpu, eff, preset)
    intra = _scope(m.collectives, "intra_node")
    inter = _scope(m.collectives, "inter_node")
    out: dict[str, Any] = {"gpus_per_node": m.ranks_per_node}
    sources["gpus_per_node"] = f"{MEASURED}: ranks per node (LOCAL_WORLD_SIZE)"
    intra_fit = _fit(base, intra, False, facts, preset) if intra else None
    inter_fit = _fit(base, inter, True, facts, preset) if inter else None
    for prefix, key, fit, fallback in (
        ("intra_node", "intra_node", intra_fit, None),
        ("network", "network", inter_fit, intra_fit),
    ):
        band, lat, e, why = _pick(base, prefix, fit, fallback, preset)
        out[f"{prefix}_bandwidth_gbps"], out[f"{prefix}_latency_us"], out[key] = round(band, 6), round(lat, 6), round(e, 6)
        for field in (f"{prefix}_bandwidth_gbps", f"{prefix}_latency_us", f"efficiency.{key}"):
            sources[field] = why
    out["runtime_overhead_gib"] = preset.runtime_overhead_gib if preset else round(_rss_gib(), 3)
    sources["runtime_overhead_gib"] = f"preset '{preset.name}'" if preset else f"{MEASURED}: resident memory of the profiling process before its buffers"
    out["overlap_slowdown"] = preset.efficiency.overlap_slowdown if preset else EfficiencySpec.model_fields["overlap_slowdown"].default
    sources["efficiency.overlap_slowdown"] = f"{NOT_MEASURED} preset '{preset.name}'" if preset else f"{NOT_MEASURED} EfficiencySpec default"
    out["step_fixed_s"], sources["efficiency.step_fixed_s"] = _step_fixed(facts, m, preset)
    return out


def _base_spec(facts: DeviceFacts, m: Measurements, gpu: dict[str, Any], eff: dict[str, float], preset: ClusterSpec | None) -> ClusterSpec:
    """A provisional spec the link fits evaluate ``costmodel.comm`` on."""
    links = preset or None
    return ClusterSpec.model_validate({
        "name": "profile", "gpu": {k: gpu[k] for k in ("name", "peak_bf16_tflops", "hbm_gib", "hbm_bandwidth_gbps")},
        "gpus_per_node": m.ranks_per_node,
        "intra_node_bandwidth_gbps": links.intra_node_bandwidth_gbps if links else gpu["hbm_bandwidth_gbps"],
        "network_bandwidth_gbps": links.network_bandwidth_gbps if links else gpu["hbm_bandwidth_gbps"],
        "intra_node_latency_us": links.intra_node_latency_us if links else 10.0,
        "network_latency_us": links.network_latency_us if links else 10.0,
        "efficiency": {**eff, "intra_node": 0.5, "network": 0.5},
    })


def _scope(points: list[CollectivePoint], scope: str) -> list[CollectivePoint]:
    return [p for p in points if p.scope == scope]


def _fit(base: ClusterSpec, points: list[CollectivePoint], across: bool, facts: DeviceFacts, preset: ClusterSpec | None) -> tuple[float, float, float, str]:
    """(bandwidth, latency, efficiency, citation) from one scope's collectives."""
    reduce = sorted((p for p in points if p.op == "all_reduce"), key=lambda p: p.bytes)
    n = reduce[0].ranks
    datasheet = facts.device_type == "cuda" and preset is not None
    if datasheet:
        band = preset.network_bandwidth_gbps if across else preset.intra_node_bandwidth_gbps
        how = f"link rate: datasheet of preset '{preset.name}'"
    else:
        band = max(p.busbw_gbps for p in points)
        how = f"link rate: best busbw of {len(points)} collectives"
    rows = [(p.op, p.ranks, p.bytes, p.time_s) for p in points]
    eff, latency = fit_link(base, across, n, band, rows)
    ops = sorted({p.op for p in points if p.op in LINK_OPS})
    why = (f"{MEASURED}: {how}; efficiency and LL128 hop latency fitted so that costmodel.comm reproduces the "
           f"measured {', '.join(ops)} times over {n} ranks, {len(reduce)} sizes each (robust least squares)")
    return band, latency, eff, why


def _pick(base: ClusterSpec, prefix: str, fit: tuple[float, float, float, str] | None,
          fallback: tuple[float, float, float, str] | None, preset: ClusterSpec | None) -> tuple[float, float, float, str]:
    """The fitted values, else the preset's, else the fallback scope's, else the provisional spec's."""
    if fit:
        return fit
    key = "intra_node" if prefix == "intra_node" else "network"
    if preset:
        return (getattr(preset, f"{prefix}_bandwidth_gbps"), getattr(preset, f"{prefix}_latency_us"),
                getattr(preset.efficiency, key), f"{NOT_MEASURED} preset '{preset.name}' (no {prefix.replace('_', '-')} ranks to measure)")
    if fallback:
        return (*fallback[:3], f"{NOT_MEASURED} no second node: the intra-node values stand in")
    return (getattr(base, f"{prefix}_bandwidth_gbps"), getattr(base, f"{prefix}_latency_us"), 0.5,
            f"{NOT_MEASURED} one process: memory bandwidth, 10 us and efficiency 0.5 stand in")


def _step_fixed(facts: DeviceFacts, m: Measurements, preset: ClusterSpec | None) -> tuple[float, str]:
    """The step's fixed time: a GPU node keeps the preset's training-loop value; a CPU cluster starts
    from what a step must synchronise (a barrier and the loss all-reduce), for calibrate to refine."""
    if facts.device_type == "cuda" and preset is not None:
        return preset.efficiency.step_fixed_s, f"{NOT_MEASURED} preset '{preset.name}' (a training loop's host time; fit it with meshplan calibrate)"
    seconds = max(m.step_sync_s, m.kernel_overhead_s)
    return round(seconds, 9), f"{MEASURED}: one barrier + one-element all-reduce + .item() (a lower bound; fit the loop's with meshplan calibrate)"


def _rss_gib() -> float:
    """Resident memory of this process, GiB (``/proc/self/statm``; 0 where absent)."""
    import os

    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 1024**3
