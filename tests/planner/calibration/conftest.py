"""A tiny Llama (config.json), a CPU-like cluster file, and runs "measured" on a known truth: the
truth is that cluster with known factors applied, so a fit can be checked against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costmodel.specs import ClusterSpec
from planner.calibration import Observation, apply, predict
from planner.estimation.estimate import build_config
from planner.estimation.result import estimate_config
from planner.intake.arguments import resolve_model_arg
from planner.plans.build import summary
from planner.runtime.record import (
    Comparison, Environment, ModelRun, PlanSummary, RunRecord, StepTimeStats, compare,
)
from profiles import load_cluster

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 344,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1024,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}
CPU_CLUSTER = {
    "gpu": {"name": "cpu-test", "peak_bf16_tflops": 0.08, "hbm_gib": 8.0, "hbm_bandwidth_gbps": 30.0},
    "gpus_per_node": 4, "intra_node_bandwidth_gbps": 2.0, "network_bandwidth_gbps": 2.0,
    "intra_node_latency_us": 30.0, "network_latency_us": 30.0, "runtime_overhead_gib": 0.3,
    "efficiency": {"gemm_max": 0.8, "gemm_half_gflop": 0.001, "attention": 0.1, "memory": 0.6, "kernel_overhead_us": 6.0,
                   "intra_node": 0.6, "network": 0.6, "step_fixed_s": 0.002, "overlap_slowdown": 0.1},
}
TRUTH = {"compute": 0.6, "overhead": 20.0, "step_fixed": 0.01}
"""The factors the synthetic runs were "measured" with."""
SHAPES = [  # gpus, tp, pp, global batch, seq, micro-batch
    (2, 1, 1, 8, 128, 1), (2, 2, 1, 8, 128, 1), (2, 1, 2, 8, 128, 1), (2, 1, 1, 16, 256, 2),
    (4, 2, 1, 8, 64, 1), (1, 1, 1, 4, 128, 1),
]


@pytest.fixture
def model_path(tmp_path: Path) -> str:
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY_LLAMA), encoding="utf-8")
    return str(path)


@pytest.fixture
def cluster_path(tmp_path: Path) -> str:
    path = tmp_path / "cpu_cluster.json"
    path.write_text(json.dumps(CPU_CLUSTER), encoding="utf-8")
    return str(path)


def measured_runs(model_arg: str, cluster: ClusterSpec, truth: dict[str, float] = TRUTH) -> list[Observation]:
    """One observation per shape of :data:`SHAPES`, its step time predicted on the truth."""
    model = resolve_model_arg(model_arg)
    real = apply(cluster, truth)
    runs = []
    for gpus, tp, pp, batch, seq, mb in SHAPES:
        cfg, _ = build_config(model, cluster, gpus, tp=tp, pp=pp, global_batch=batch, seq_len=seq, micro_batch=mb, zero=0)
        step = predict(Observation("probe", model_arg, model, cfg, 1.0), real)[0]
        runs.append(Observation(f"run{len(runs)}", model_arg, model, cfg, step))
    return runs


def run_record(obs: Observation, cluster_arg: str, model_arg: str | None = None, layers: int | None = None) -> RunRecord:
    """A run record as ``meshplan run`` writes it for ``obs`` (its plan predicted on ``cluster_arg``)."""
    cluster = load_cluster(cluster_arg)
    est = estimate_config(obs.model, cluster, obs.config)
    cfg = obs.config
    plan = PlanSummary(
        summary=summary(cfg), model_arg=obs.model_arg, cluster_name=cluster.name, cluster=cluster.model_dump(mode="json"),
        gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, micro_batch=cfg.micro_batch,
        num_microbatches=cfg.num_microbatches, schedule=cfg.schedule, virtual_stages=cfg.vpp,
        mesh={"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp}, stage_layers=[list(range(len(obs.model.layers)))],
        config=cfg.model_dump(mode="json"), estimate=est.model_dump(mode="json"),
    )
    step = obs.step_time_s
    return RunRecord(
        plan=plan,
        model=ModelRun(arg=model_arg or obs.model_arg, name=obs.model.name, num_layers=layers or len(obs.model.layers), params=1000, dtype="float32"),
        world_size=cfg.num_gpus,
        env=Environment(torch_version="2.13.0", python_version="3.11", platform="linux", backend="gloo", device_type="cpu",
                        device_names=["cpu"] * cfg.num_gpus, hostnames=["host"]),
        seed=0, steps=5, warmup=2, losses=[7.0] * 5,
        step_time=StepTimeStats(median_s=step, min_s=step, max_s=step, spread=0.0, timed_steps=3, warmup_steps=2, all_steps_s=[step] * 5),
        step_time_s=compare(step, est.step_time_s),
        tokens_per_s=compare(cfg.global_batch * cfg.seq_len / step, est.tokens_per_s),
        mfu=Comparison(measured=None, predicted=None, error=None),
        peak_memory_gib=compare(0.5, est.peak_memory_gib),
    )
