"""Golden tests of the engine terms (costmodel.engines), FP8 (costmodel.precision) and power caps
against their published sources, and the behaviour each term must produce in a step estimate."""

from __future__ import annotations

import pytest

from costmodel.engines import FUSED_CE_BYTES, MEGATRON_CE_BYTES, TORCH_CE_BYTES, engine_terms, sac_saved_matmuls
from costmodel.kernels import clock_fraction
from costmodel.memory import model_state_bytes
from costmodel.precision import CAST_BYTES_PER_ELEMENT, cast_bytes_per_element, fp8_gemm_speedup
from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer
from costmodel.step import FSDP2_STATE_BYTES, estimate_step
from costmodel.table import build_cost_table
from profiles import load_cluster

H100, B200, A100 = load_cluster("dgx-h100"), load_cluster("dgx-b200"), load_cluster("dgx-a100")


def llama(layers: int = 4, h: int = 4096, f: int = 14336, vocab: int = 128256) -> ModelSpec:
    block = TransformerLayer(hidden_size=h, num_heads=32, num_kv_heads=8, head_dim=128, ffn_hidden_size=f, ffn_act="swiglu", norm="rmsnorm")
    body = (EmbeddingLayer(vocab_size=vocab, hidden_size=h),) + (block,) * layers + (NormLayer(hidden_size=h, norm="rmsnorm"), HeadLayer(vocab_size=vocab, hidden_size=h))
    return ModelSpec(name="llama-test", layers=body)


def step(cluster, **cfg):  # noqa: ANN001, ANN202
    base = dict(dp=8, micro_batch=2, global_batch=16, seq_len=8192)
    return estimate_step(build_cost_table(llama(), cluster), ParallelConfig(**{**base, **cfg}))


def test_cross_entropy_traffic_is_the_sum_of_its_ops() -> None:
    """megatron/core/tensor_parallel/cross_entropy.py op by op; fused_cross_entropy.py's three
    kernels; torch's .float() + log_softmax + nll_loss and their backward."""
    assert MEGATRON_CE_BYTES[:2] == (2 + 4 + 4 + 8 + 8 + 4 + 8, 8 + 6)
    assert FUSED_CE_BYTES[:2] == (2 + 2 + 4 + 4 + 4 + 4, 4 + 2)
    assert TORCH_CE_BYTES[:2] == (2 + 4 + 4 + 4 + 4, 4 + 12 + 6 + 4)


def test_torchtitan_op_sac_saves_every_other_matmul() -> None:
    """torchtitan ``_custom_policy``: an aten.mm is saved unless its count in the block is even, so
    of wq, wk, wv, wo, w1, w3, w2 it saves wq, wv, w1, w2."""
    assert sac_saved_matmuls([1.0] * 7) == [True, False, True, False, True, False, True]


def test_fp8_gemm_speedup_is_the_ratio_of_measured_ceilings() -> None:
    """stas00/ml-engineering MAMF: H100 SXM 1402.6 FP8 / 794.5 BF16; B200 3432.5 / 1745.0."""
    assert fp8_gemm_speedup(H100) == pytest.approx(1402.6 / 794.5, rel=2e-3)
    assert fp8_gemm_speedup(B200) == pytest.approx(3432.5 / 1745.0, rel=2e-3)
    with pytest.raises(ValueError, match="no FP8"):
        fp8_gemm_speedup(A100)


def test_cast_bytes_delayed_dynamic_and_mx() -> None:
    assert cast_bytes_per_element(H100, dynamic=False, fused=True) == CAST_BYTES_PER_ELEMENT == 2 + 1 + 1
    assert cast_bytes_per_element(H100, dynamic=True, fused=False) == 4 + 2
    assert cast_bytes_per_element(B200, dynamic=False, fused=True) == pytest.approx(4 + 2 / 32)


def test_power_cap_cube_law_and_stated_clocks() -> None:
    titan = load_cluster("grand-teton-h100")
    assert clock_fraction(titan) == pytest.approx((500 / 700) ** (1 / 3))
    assert clock_fraction(H100) == 1.0
    assert clock_fraction(titan.model_copy(update={"sustained_clock_fraction": 0.8})) == 0.8


def test_fsdp2_keeps_16_bytes_per_parameter_sharded() -> None:
    """FSDP2 mixed precision: fp32 param, fp32 grad, Adam m and v, all sharded: 16Ψ/d. The gradients
    are set to None every step: at the one-micro-batch peak (the start of backward) none is allocated,
    and the freed ones are the allocator's cache, a GPU-only term."""
    assert sum(model_state_bytes(1e6, 8, 3, *FSDP2_STATE_BYTES)) == pytest.approx(16e6 / 8)
    est = step(H100, zero=3, engine="torchtitan", recompute="selective")
    tracked, gpu_only = est.rank_memory_parts_gib(0)
    assert tracked["params"] == pytest.approx(tracked["optimizer_states"] / 2)
    if est.config.num_microbatches == 1:
        assert tracked["grads"] == 0 and gpu_only["allocator_cache"] == pytest.approx(tracked["params"])
    assert tracked["grads"] + gpu_only["allocator_cache"] == pytest.approx(tracked["params"])
    assert sum(est.memory_breakdown_gib.values()) == pytest.approx(sum(tracked.values()) + sum(gpu_only.values()))


def test_engine_defaults() -> None:
    titan = engine_terms(ParallelConfig(global_batch=8, seq_len=8, engine="torchtitan"))
    assert not titan.fused and titan.op_level_selective and not titan.fp8_saves_fp8_inputs
    assert engine_terms(ParallelConfig(global_batch=8, seq_len=8, engine="torchtitan", compile=True)).fused
    mega = engine_terms(ParallelConfig(global_batch=8, seq_len=8, engine="megatron", pp=2))
    assert mega.fused and mega.p2p_overlapped and not mega.dp_after_flush and mega.microbatch_host_s == 0
    ds = engine_terms(ParallelConfig(global_batch=8, seq_len=8, engine="deepspeed", pp=2))
    assert ds.dp_after_flush and ds.microbatch_host_s > 0 and not ds.p2p_overlapped


def test_native_time_terms_are_the_eager_runtime() -> None:
    """The native engine prices what ``planner.apply`` runs: op-by-op elementwise kernels, the eager
    fp32 loss, SDPA's FlashAttention-2, synchronous DTensor TP and unfused gradient accumulation; the
    same step is slower than the fused (compiled) variant and than Megatron-LM's kernels."""
    native = engine_terms(ParallelConfig(global_batch=8, seq_len=8, tp=2, pp=2, loss_fusion=True))
    assert not native.fused and native.sdpa_fa2 and not native.tp_async_backward and not native.grad_accum_fused
    assert (native.ce_fwd_bytes, native.ce_bwd_bytes) == TORCH_CE_BYTES[:2] and native.p2p_overlapped
    assert engine_terms(ParallelConfig(global_batch=8, seq_len=8, compile=True)).fused
    eager = step(H100, zero=3)
    assert eager.step_time_s > step(H100, zero=3, compile=True).step_time_s
    assert eager.step_time_s > step(H100, zero=3, engine="megatron").step_time_s
    assert eager.peak_memory_gib == step(H100, zero=3, compile=True).peak_memory_gib  # memory is the runtime's either way


def test_compile_fuses_and_op_sac_recomputes_matmuls() -> None:
    eager = step(H100, zero=3, engine="torchtitan", recompute="selective")
    compiled = step(H100, zero=3, engine="torchtitan", recompute="selective", compile=True)
    assert compiled.step_time_s < eager.step_time_s
    mega = step(H100, zero=3, engine="megatron", recompute="selective")
    assert mega.time_breakdown_s["recompute"] == 0.0  # FlashAttention already recomputes its core
    assert compiled.time_breakdown_s["recompute"] > 0.05 * compiled.time_breakdown_s["compute"]
    assert compiled.ranks.types[0].act_bytes < 0.6 * mega.ranks.types[0].act_bytes  # stored for backward
    assert compiled.ranks.types[0].work_bytes == pytest.approx(2 * mega.ranks.types[0].work_bytes)  # 12 vs 6 B per logit


def test_op_sac_stores_input_saved_matmuls_and_sdpa() -> None:
    """Per token per block: input 2h, wq 2q, wv 2kv, w1 2f, w2 2h, SDPA output 2q and fp32 LSE 4a."""
    from costmodel.activations import block_activation_bytes
    from costmodel.layer_transformer import _projections
    from costmodel.step import local_config

    model = llama()
    cfg = ParallelConfig(dp=8, micro_batch=2, global_batch=16, seq_len=8192, zero=3, engine="torchtitan", recompute="selective")
    local = local_config(build_cost_table(model, H100), cfg, "selective")
    block = model.layers[1]
    stored, _ = block_activation_bytes(block, local, [w for _, _, w in _projections(block, local)])
    h, q, kv, f = 4096, 4096, 1024, 14336
    assert stored == pytest.approx(2 * 8192 * (2 * (h + q + kv + f + h + q) + 4 * 32))


def test_fp8_is_faster_and_te_keeps_fp8_inputs_and_weight_copies() -> None:
    bf16 = step(H100, engine="megatron", zero=1)
    fp8 = step(H100, engine="megatron", zero=1, precision="fp8")
    assert fp8.step_time_s < bf16.step_time_s
    assert fp8.memory_breakdown_gib["activations"] < bf16.memory_breakdown_gib["activations"]
    assert fp8.memory_breakdown_gib["buffers"] > bf16.memory_breakdown_gib["buffers"]
    mx = estimate_step(build_cost_table(llama(), B200), fp8.config)
    assert mx.step_time_s < estimate_step(build_cost_table(llama(), B200), bf16.config).step_time_s


def test_deepspeed_reduces_after_the_flush() -> None:
    base = dict(pp=2, dp=4, micro_batch=1, global_batch=32, zero=1)
    mega = step(A100, engine="megatron", **base)
    ds = step(A100, engine="deepspeed", **base)
    assert ds.step_time_s > mega.step_time_s
    assert ds.time_breakdown_s["optimizer"] - mega.time_breakdown_s["optimizer"] == pytest.approx(8 * 6 * 0.5e-3)


def test_power_cap_slows_compute_bound_steps() -> None:
    titan = load_cluster("grand-teton-h100")
    capped = estimate_step(build_cost_table(llama(), titan), step(H100).config)
    free = estimate_step(build_cost_table(llama(), titan.model_copy(update={"power_limit_w": None})), step(H100).config)
    assert 1.05 < capped.step_time_s / free.step_time_s < 1 / clock_fraction(titan) + 1e-9


def test_context_parallel_ring_vs_all_gather() -> None:
    """Megatron's p2p ring overlaps the K/V exchange with attention; torchtitan's all-gather rotation
    gathers K/V forward and backward and reduce-scatters dK/dV, all exposed (notes 2.6.4)."""
    base = dict(cp=8, dp=1, micro_batch=1, global_batch=1, seq_len=131072, recompute="full", zero=1)
    ring = step(H100, engine="megatron", **base)
    gather = step(H100, engine="torchtitan", **base)
    assert gather.ranks.types[0].exposed_s > 0
    assert ring.ranks.types[0].exposed_s < gather.ranks.types[0].exposed_s


def test_fsdp2_under_pipelining_gathers_once_and_keeps_the_stage() -> None:
    """torchtitan: reshard_after_forward=False with PP, gradients reduced on the last backward only."""
    base = dict(pp=2, dp=4, micro_batch=1, global_batch=32, zero=3, engine="torchtitan", recompute="full")
    est = step(H100, **base)
    rank = est.ranks.types[0]
    assert rank.links["dp"] == 0.0  # no per-layer, per-micro-batch gathers
    assert est.link_time_s["dp"] > 0  # one gather and one reduce-scatter per step instead
    assert est.memory_breakdown_gib["buffers"] * 2**30 >= 6 * max(t.params for t in est.ranks.types)


def test_flash_tile_efficiency_and_kernel_choice() -> None:
    """FlashAttention-2 Alg. 1 with 128-key tiles: T/(T + 1 + 1/2) for causal queries over T tiles;
    SDPA's FlashAttention-2 runs at 298/484 of the Hopper ceiling (Shah et al. 2024), not on A100."""
    from costmodel.kernels import FA2_ON_HOPPER, attention_time, tile_efficiency

    assert tile_efficiency(1024, causal=True) == pytest.approx(8 / 9.5)
    assert tile_efficiency(4096, causal=False) == pytest.approx(32 / 33)
    flops = 1e15
    assert attention_time(H100, flops, context=1024) / attention_time(H100, flops, context=65536) == pytest.approx(
        tile_efficiency(65536, True) / tile_efficiency(1024, True), rel=1e-6)
    assert attention_time(H100, flops, fa2=True) == pytest.approx(attention_time(H100, flops) / FA2_ON_HOPPER, rel=1e-6)
    assert attention_time(A100, flops, fa2=True) == attention_time(A100, flops)


def test_eager_elementwise_counts_op_by_op() -> None:
    """torchtitan's eager RMSNorm (28 B), rotary (20 B per q/k element), SwiGLU (5f) and Megatron 2019's
    unfused bias-dropout-add (+4.5h per branch) against the fused kernels."""
    from costmodel.layer_transformer import _elementwise_bytes
    from costmodel.step import local_config

    model = llama(layers=1)
    table = build_cost_table(model, H100)
    base = ParallelConfig(dp=1, micro_batch=1, global_batch=1, seq_len=1, engine="torchtitan")
    eager = _elementwise_bytes(model.layers[1], local_config(table, base, "none"))
    fused = _elementwise_bytes(model.layers[1], local_config(table, base.model_copy(update={"compile": True}), "none"))
    h, f, qk = 4096, 14336, (32 + 8) * 128
    assert eager - fused == pytest.approx(2 * (2 * (14 - 2) * h + 2 * f + 10 * qk))


def test_peak_is_the_larger_of_start_and_end_of_backward() -> None:
    """Gradients freed every step (torchtitan): one micro-batch peaks at the start of backward without
    gradients; full recompute of a parameter-heavy model on few tokens peaks at the end, with every
    gradient and one micro-batch fewer; Megatron keeps its gradient buffer beside the activations."""
    start = step(H100, zero=2, engine="torchtitan").rank_memory_parts_gib(0)[0]
    assert start["grads"] == 0
    end = step(H100, zero=0, dp=1, global_batch=1, micro_batch=1, seq_len=256, engine="torchtitan", recompute="full")
    tracked, gpu_only = end.rank_memory_parts_gib(0)
    assert tracked["grads"] > 0 and gpu_only["allocator_cache"] == 0
    assert tracked["grads"] > tracked["activations"]
    mega = step(H100, zero=2, engine="megatron").rank_memory_parts_gib(0)
    assert mega[0]["grads"] > 0 and mega[1]["allocator_cache"] == 0


def test_gpipe_last_stage_holds_every_micro_batch_loss() -> None:
    """GPipe's last stage keeps m - 1 more fp32 log-softmax outputs (4 B per local logit) than 1F1B's."""
    base = dict(pp=2, dp=1, tp=2, micro_batch=1, global_batch=4, seq_len=1024, engine="megatron")
    gpipe, one = step(H100, schedule="gpipe", **base), step(H100, schedule="1f1b", **base)
    extra = (gpipe.rank_memory_parts_gib(1)[0]["activations"] - one.rank_memory_parts_gib(1)[0]["activations"]) * 2**30
    stage_acts = (gpipe.ranks.rank(1).act_bytes) * (4 - 1)  # GPipe holds all 4 micro-batches, 1F1B's last rank one
    assert extra == pytest.approx(stage_acts + 3 * 1024 * 128256 / 2 * 4)
