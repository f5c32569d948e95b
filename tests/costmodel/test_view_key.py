"""``costmodel.step.view_key`` names everything ``local_config`` reads: configurations with equal keys
have equal per-layer views (the search memoises per-view sums by the key, so a missing field would
reuse another view's costs)."""

from __future__ import annotations

import itertools

from pydantic import ValidationError

from costmodel.specs import ClusterSpec, EfficiencySpec, EmbeddingLayer, GPUSpec, HeadLayer, ModelSpec, ParallelConfig, TransformerLayer
from costmodel.step import local_config, view_key
from costmodel.table import build_cost_table

OTHER_VALUES: dict[str, tuple] = {
    "tp": (1, 4), "pp": (1, 4), "dp": (1, 4), "cp": (1, 2), "ep": (1, 2), "vpp": (1, 2), "sp": (False, True),
    "zero": (0, 1, 2, 3), "recompute": ("none", "selective", "full"), "layer_recompute": (None,), "micro_batch": (1, 4),
    "global_batch": (32, 64), "seq_len": (1024, 4096), "schedule": ("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"),
    "stage_layers": (None,), "attention": ("flash", "eager"), "param_bytes": (2, 4), "grad_bytes": (2, 4),
    "optimizer_bytes": (8, 12), "grad_reduce_bytes": (2, 4), "overlap_grad_reduce": (False, True),
    "overlap_param_gather": (False, True), "tp_comm_overlap": (False, True), "zero3_bucket_params": (0, 50_000_000),
    "engine": ("native", "megatron", "torchtitan", "deepspeed"), "precision": ("bf16", "fp8"), "compile": (None, False, True),
    "loss_fusion": (None, False, True), "offload_optimizer": (False, True), "offload_activations": (False, True),
    "tp_async_backward": (None, False, True), "grad_accum_fusion": (None, False, True),
}


def _table():
    block = TransformerLayer(hidden_size=512, num_heads=8, num_kv_heads=8, head_dim=64, ffn_hidden_size=2048)
    model = ModelSpec(name="tiny", layers=(EmbeddingLayer(vocab_size=1000, hidden_size=512), block, block, HeadLayer(vocab_size=1000, hidden_size=512)))
    gpu = GPUSpec(name="test-gpu", peak_bf16_tflops=300, peak_fp8_tflops=600, hbm_gib=80, hbm_bandwidth_gbps=2000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    cluster = ClusterSpec(name="test", gpu=gpu, gpus_per_node=8, intra_node_bandwidth_gbps=300, network_bandwidth_gbps=25,
                          intra_node_latency_us=2, network_latency_us=5, host_link_bandwidth_gbps=25, efficiency=eff)
    return build_cost_table(model, cluster)


def test_every_field_is_varied() -> None:
    assert set(OTHER_VALUES) == set(ParallelConfig.model_fields)


def test_equal_keys_mean_equal_views() -> None:
    table = _table()
    bases = [dict(tp=2, pp=2, dp=2, micro_batch=2, global_batch=16, seq_len=2048, sp=True, zero=z, engine=e)
             for z, e in itertools.product((0, 3), ("native", "torchtitan", "deepspeed"))]
    configs = []
    for base, (name, values) in itertools.product(bases, OTHER_VALUES.items()):
        for value in values:
            try:
                configs.append(ParallelConfig(**{**base, name: value}))
            except ValidationError:
                pass  # a combination the configuration itself refuses
    assert len(configs) > 100
    views = {}
    for cfg, recompute in itertools.product(configs, ("none", "full")):
        view = local_config(table, cfg, recompute)
        assert views.setdefault(view_key(cfg, recompute), view) == view, (cfg, recompute)
    assert len(views) > 20  # the fields the view reads do change it
