"""Offloading (costmodel.offload): ZeRO-Offload's critical path and what leaves GPU memory."""

from __future__ import annotations

import pytest

from costmodel.offload import CPU_ADAM_BYTES_PER_PARAM, HOST_DRAM_GBPS_PER_GPU, activation_offload_time, optimizer_offload_time
from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.models.presets import build_preset
from profiles import load_cluster

TITAN = load_cluster("grand-teton-h100")


def test_zero_offload_critical_path() -> None:
    """Ren et al. 2021 §4: gradient copy (hidden behind backward), CPU Adam, parameter copy back."""
    psi = 1e9
    link = TITAN.host_link_bandwidth_gbps * 1e9
    cpu = CPU_ADAM_BYTES_PER_PARAM * psi / (HOST_DRAM_GBPS_PER_GPU * 1e9)
    assert optimizer_offload_time(TITAN, psi, 4, 2, backward_s=0.0) == pytest.approx(4 * psi / link + cpu + 2 * psi / link)
    assert optimizer_offload_time(TITAN, psi, 4, 2, backward_s=10.0) == pytest.approx(cpu + 2 * psi / link)
    assert activation_offload_time(TITAN, 64e9, compute_s=1.0) == pytest.approx(2 * 64e9 / link - 1.0)
    assert activation_offload_time(TITAN, 1e9, compute_s=1.0) == 0.0


def test_offload_trades_memory_for_time() -> None:
    table = build_cost_table(build_preset("llama3.1-8b"), TITAN)
    # Megatron's memory: its first pipeline rank (two micro-batches in flight) holds the peak, which
    # offloading shrinks; under the native runtime's memory the last rank's loss transient is the peak.
    base = ParallelConfig(pp=2, dp=4, zero=1, micro_batch=1, global_batch=64, seq_len=8192, recompute="selective", engine="megatron")
    plain = estimate_step(table, base)
    opt = estimate_step(table, base.model_copy(update={"offload_optimizer": True}))
    act = estimate_step(table, base.model_copy(update={"offload_activations": True}))
    assert opt.memory_breakdown_gib["optimizer_states"] == 0 < plain.memory_breakdown_gib["optimizer_states"]
    assert act.memory_breakdown_gib["activations"] < plain.memory_breakdown_gib["activations"]
    assert opt.step_time_s > plain.step_time_s and act.step_time_s >= plain.step_time_s
