"""The GPU side of ``meshplan profile`` without a GPU: measurements an ideal H100 node would give
(timed by the cost model of the ``dgx-h100`` preset itself) come back as that preset's numbers, so the
derivations and the cluster file are consistent with ``costmodel`` on the path CUDA takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from costmodel import comm
from costmodel.kernels import attention_time, gemm_time
from planner.runtime.profile.cluster_file import build_result
from planner.runtime.profile.collectives import BUS_FACTOR
from planner.runtime.profile.compute import attention_flops, transformer_gemms
from planner.runtime.profile.derive import attention_efficiency
from planner.runtime.profile.hardware import DeviceFacts
from planner.runtime.profile.measure import Measurements
from planner.runtime.profile.records import AttentionPoint, CollectivePoint, GemmPoint, MemoryPoint
from profiles import cluster_sources, load_cluster


def _ideal_measurements(preset) -> Measurements:  # type: ignore[no-untyped-def]
    eff, gpu = preset.efficiency, preset.gpu
    m = Measurements(world=8, ranks_per_node=8, kernel_overhead_s=eff.kernel_overhead_us * 1e-6, step_sync_s=1e-4)
    for s in transformer_gemms((2048, 4096, 8192), 4096, (1, 2, 4, 8)):
        t = gemm_time(preset, s.flops)
        m.gemm.append(GemmPoint(role=s.role, shape=s.label, m=s.m, n=s.n, k=s.k, dtype="bfloat16", time_s=t, tflops=s.flops / t / 1e12))
        t8 = (s.flops + 0.5e9) / (gpu.peak_fp8_tflops * 1e12 * 0.7)
        m.gemm.append(GemmPoint(role=s.role, shape=s.label, m=s.m, n=s.n, k=s.k, dtype="float8_e4m3fn", time_s=t8, tflops=s.flops / t8 / 1e12))
    for seq in (1024, 4096):
        flops = attention_flops(4, 16, seq, 128)
        t = attention_time(preset, flops / 3.5) + attention_time(preset, 2.5 * flops / 3.5)
        e = attention_efficiency(flops, t, 128, gpu.peak_bf16_tflops * 1e12, eff.kernel_overhead_us * 1e-6)
        m.attention.append(AttentionPoint(backend="default", batch=4, heads=16, seq_len=seq, head_dim=128, dtype="bfloat16", time_s=t, tflops=flops / t / 1e12, efficiency=e))
    for nbytes in (64 << 20, 1 << 30):
        t = 2 * nbytes / (gpu.hbm_bandwidth_gbps * 1e9 * eff.memory)
        m.memory.append(MemoryPoint(op="copy", bytes=nbytes, time_s=t, gbps=2 * nbytes / t / 1e9))
    group = comm.Group(size=8, per_node=8)
    for op, fn in (("all_reduce", comm.all_reduce), ("all_gather", comm.all_gather), ("reduce_scatter", comm.reduce_scatter)):
        for nbytes in (4096 * 4**i for i in range(10)):
            t = fn(preset, group, nbytes)
            algbw = nbytes / t / 1e9
            m.collectives.append(CollectivePoint(op=op, scope="intra_node", ranks=8, bytes=nbytes, time_s=t, algbw_gbps=algbw, busbw_gbps=algbw * BUS_FACTOR[op](8)))
    return m


def test_an_ideal_h100_node_profiles_as_its_preset(tmp_path: Path) -> None:
    preset = load_cluster("dgx-h100")
    facts = DeviceFacts("cuda", "NVIDIA H100 80GB HBM3", preset.gpu.name, torch.bfloat16, (torch.bfloat16, torch.float8_e4m3fn),
                        preset.gpu.peak_bf16_tflops, "datasheet", preset.gpu.hbm_gib, 8)
    result = build_result("h100-measured", facts, _ideal_measurements(preset), preset)
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(result.entry), encoding="utf-8")
    got, want = load_cluster(path).efficiency, preset.efficiency
    for field in ("gemm_max", "attention", "memory", "intra_node", "kernel_overhead_us"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=0.01), field
    assert got.gemm_half_gflop == pytest.approx(want.gemm_half_gflop, rel=0.05)
    cluster = load_cluster(path)
    assert cluster.intra_node_latency_us == pytest.approx(preset.intra_node_latency_us, rel=0.05)
    assert cluster.network_bandwidth_gbps == preset.network_bandwidth_gbps and got.network == want.network  # one node: the preset's
    assert got.step_fixed_s == want.step_fixed_s and cluster.gpu.peak_fp8_tflops == preset.gpu.peak_fp8_tflops
    assert cluster.gpu.fp8_mamf_fraction == pytest.approx(0.7, rel=0.01)
    assert cluster.gpu.bf16_mamf_fraction == pytest.approx(want.gemm_max, rel=0.01)
    assert "not measured" in cluster_sources(path)["network_bandwidth_gbps"]
    rows = {r.quantity: r for r in result.rows}
    assert rows["GEMM ceiling"].measured == pytest.approx(rows["GEMM ceiling"].preset, rel=0.01)
    assert rows["FP8 GEMM ceiling"].measured == pytest.approx(preset.gpu.peak_fp8_tflops * 0.7, rel=0.01)
    assert rows["network busbw"].measured is None
    for point in result.entry["measurements"]["collectives"]:
        assert point["model_s"] == pytest.approx(point["time_s"], rel=0.03)


def test_the_printed_table_and_chart_compare_with_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    from planner.cli._profile_view import print_profile

    preset = load_cluster("dgx-h100")
    facts = DeviceFacts("cuda", "NVIDIA H100 80GB HBM3", preset.gpu.name, torch.bfloat16, (torch.bfloat16,),
                        preset.gpu.peak_bf16_tflops, "datasheet", preset.gpu.hbm_gib, 8)
    print_profile(build_result("h100-measured", facts, _ideal_measurements(preset), preset), "h100.json")
    text = capsys.readouterr().out
    assert "measured vs dgx-h100" in text and "all-reduce busbw, intra-node, 8 ranks" in text and "wrote h100.json" in text
    line = next(row for row in text.splitlines() if row.strip().startswith("GEMM ceiling"))
    assert line.rstrip().endswith("1.00x")
    size_rows = [row for row in text.splitlines() if row.strip().startswith(("4 KiB", "1 GiB"))]
    assert len(size_rows) == 2 and all("█" in row for row in size_rows)
