"""Prefill and decode step terms against published rules and the training model's own functions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.comm import all_to_all, place_group, send_recv
from costmodel.kernels import gemm_time
from costmodel.serving.allreduce import kernel_floor_us
from costmodel.serving.comm import ep_all_to_all, pp_hand_off
from costmodel.serving.engines import DEFAULTS, on_gpu
from costmodel.serving.hbm import stream_seconds
from costmodel.serving.shape import block_forward_flops, decode_core_width, model_shape
from costmodel.serving.specs import NVFP4_BYTES_PER_PARAM, Instance, LowPrecisionRates, ServingEfficiency
from costmodel.serving.step import (
    DEQUANT_TILE_ROWS,
    TRITON_MOE_KERNELS,
    Hardware,
    activation_quant_kernels,
    block_weight_params,
    decode_block_parts,
    decode_step_parts,
    decode_step_time,
    dense_precision,
    dequant_seconds,
    expert_gemm_speedup,
    expert_shard_params,
    gemm_speedup,
    hbm_rate,
    layer_kernels,
    mla_decode_floor,
    mla_extra_kernels,
    mx_storage,
    non_expert_bytes,
    prefill_time,
    prefill_weight_bytes,
    shared_expert_in_series,
    triton_mxfp4_moe,
    weights_bytes_per_gpu,
)
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from profiles import load_gpu
from profiles.serving import fp4_experts_only, fp8_block_scaled, low_precision_rates

H100 = Hardware(resolve_cluster_arg("dgx-h100"), LowPrecisionRates(), ServingEfficiency())
LLAMA70B = model_shape(resolve_model_arg("llama3.1-70b"))


def test_forward_gemms_cost_two_flops_per_parameter_per_token() -> None:
    """Kaplan et al. 2020 (arXiv:2001.08361 §2.1): a forward pass costs about 2N FLOPs per token for N
    non-embedding parameters (plus the attention term)."""
    gemm = sum(block_forward_flops(b, 1.0, 1.0)[0] * b.count for b in LLAMA70B.blocks)
    block_params = sum((b.attention_params + b.dense_params) * b.count for b in LLAMA70B.blocks)
    assert gemm == pytest.approx(2 * block_params, rel=0.001)


def test_prefill_is_no_faster_than_the_fp8_peak() -> None:
    """A 70B prefill of 8,192 tokens on 4 H100s: at least 2·N·tokens / (4 x 1979 TFLOP/s FP8 peak)."""
    t = prefill_time(H100, LLAMA70B, Instance(tp=4), 8192, 8192, "fp8")
    floor = 2 * 70.6e9 * 8192 / (4 * 1979e12)
    assert floor < t < 3 * floor


def test_fp8_gemms_run_at_the_measured_fp8_over_bf16_ratio() -> None:
    """MAMF (stas00/ml-engineering): H100 FP8 1402.6 / BF16 794.5 = 1.77."""
    assert gemm_speedup(H100, "fp8") == pytest.approx(1402.6 / 794.5, rel=0.005)
    assert gemm_time(H100.cluster, 1e12, gemm_speedup(H100, "fp8")) < gemm_time(H100.cluster, 1e12)


def test_decode_is_memory_bound_at_small_batch_and_compute_bound_at_large() -> None:
    small = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 1, 2000, "fp8", 1.0)
    large = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 4096, 2000, "fp8", 1.0)
    assert small.traffic > small.compute and large.compute > 100 * small.compute


def test_ep_dispatch_and_combine_are_the_training_all_to_all() -> None:
    """DeepSeek-V3 (arXiv:2412.19437 §3.3.2): dispatch in FP8 (1 byte), combine in BF16 (2 bytes)."""
    cluster = H100.cluster
    group = place_group(8, 1, 8)
    expected = all_to_all(cluster, group, 32 * 8 * 7168 * 1.0) + all_to_all(cluster, group, 32 * 8 * 7168 * 2.0)
    assert ep_all_to_all(cluster, 8, 32, 7168, 8) == expected
    assert ep_all_to_all(cluster, 1, 32, 7168, 8) == 0.0


def test_pipeline_hand_off_is_one_send() -> None:
    assert pp_hand_off(H100.cluster, 64, 8192) == send_recv(H100.cluster, 64 * 8192 * 2.0, False)


def test_pipeline_stages_multiply_tpot_by_their_micro_batches() -> None:
    one = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 64, 2000, "fp8", 1.0).total
    two = decode_step_parts(H100, LLAMA70B, Instance(tp=4, pp=2), 64, 2000, "fp8", 1.0).total
    assert 0.5 * one < two < 1.5 * one


def test_fused_allreduce_norm_drops_two_kernels_per_layer_only_under_tp() -> None:
    """TensorRT-LLM's AllReduceFusionOp.RESIDUAL_RMS_NORM: the add-and-norm runs inside the all-reduce."""
    block = LLAMA70B.blocks[0]
    trt = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["trtllm"])
    assert layer_kernels(trt, block, Instance(tp=4)) == DEFAULTS["trtllm"].kernels_per_layer - 2
    assert layer_kernels(trt, block, Instance(tp=1)) == DEFAULTS["trtllm"].kernels_per_layer
    assert layer_kernels(H100, block, Instance(tp=4)) == DEFAULTS["vllm"].kernels_per_layer


def test_decode_overhead_is_the_graph_kernel_floor_times_the_kernels() -> None:
    parts = decode_step_parts(H100, LLAMA70B, Instance(tp=1), 8, 2000, "fp8", 1.0)
    kernels = sum(layer_kernels(H100, b, Instance(tp=1)) * b.count for b in LLAMA70B.blocks)
    assert parts.overhead == pytest.approx(kernels * kernel_floor_us(H100.cluster) * 1e-6)


def test_sliding_window_layers_read_only_their_window() -> None:
    """gpt-oss-120b: 128-token windows on every other layer (openai/gpt-oss-120b config.json)."""
    shape = model_shape(resolve_model_arg("gpt-oss-120b"))
    windowed = next(b for b in shape.blocks if b.window == 128)
    full = next(b for b in shape.blocks if b.window is None)
    short = decode_block_parts(H100, windowed, Instance(), 16, 8000, "fp8", 1.0)
    long = decode_block_parts(H100, full, Instance(), 16, 8000, "fp8", 1.0)
    assert short.traffic < long.traffic
    kv_long = 16 * 8000 * full.kv_elements_per_token
    kv_short = 16 * 128 * windowed.kv_elements_per_token
    bandwidth = 3350e9 * H100.efficiency.kv_memory
    expected = stream_seconds(kv_long, 1, bandwidth) - stream_seconds(kv_short, 1, bandwidth)
    assert long.traffic - short.traffic == pytest.approx(expected, rel=1e-6)


def test_mla_decodes_in_the_absorbed_latent_form() -> None:
    """DeepSeek-V3: 128 heads over the 576-wide latent keys and 512-wide latent values (FlashMLA)."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    assert decode_core_width(shape.blocks[0]) == 128 * (512 + 576)


def test_weight_only_fp4_on_hopper_streams_mxfp4_and_computes_in_bf16() -> None:
    assert mx_storage(H100, "fp4") and not mx_storage(H100, "fp8")
    assert gemm_speedup(H100, "fp4") == 1.0


def test_fp4_upcast_in_the_alus_costs_per_row_block_on_cdna3_only() -> None:
    """gfx942 has no FP4 MFMA: vLLM's triton matmul_ogs upcasts every FP4 weight tile once per
    32-row block of the batch (ROCm/triton #970); NVIDIA GPUs stream FP4 at its stored width."""

    mi325x = Hardware(resolve_cluster_arg("mi325x-8"), low_precision_rates(load_gpu("mi325x")), ServingEfficiency())
    b200 = Hardware(resolve_cluster_arg("dgx-b200"), low_precision_rates(load_gpu("b200")), ServingEfficiency())
    one = dequant_seconds(mi325x, "fp4", 75.5e6, 1)
    assert one == pytest.approx(75.5e6 / 3.03e12)
    assert dequant_seconds(mi325x, "fp4", 75.5e6, DEQUANT_TILE_ROWS + 1) == pytest.approx(2 * one)
    assert dequant_seconds(mi325x, "fp8", 75.5e6, 1) == 0.0 and dequant_seconds(b200, "fp4", 75.5e6, 1) == 0.0
    shape = model_shape(resolve_model_arg("gpt-oss-120b"))
    slow = decode_step_parts(mi325x, shape, Instance(tp=8), 32, 1500, "fp4", 1.0)
    fast = decode_step_parts(mi325x, shape, Instance(tp=8), 32, 1500, "bf16", 1.0)
    assert slow.compute > fast.compute


def test_measured_mla_decode_floor_replaces_the_kernel_floor_on_rocm_mla_layers_only() -> None:
    """aiter's ASM MLA decode takes 15.491 us on MI300 at one 21-key sequence (ROCm/aiter PR 2039):
    an MLA layer's attention costs that instead of the generic floor; GQA layers and NVIDIA GPUs
    keep the generic floor."""
    mi300x = Hardware(resolve_cluster_arg("mi300x-8"), low_precision_rates(load_gpu("mi300x")), ServingEfficiency())
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    extra = (15.491 - kernel_floor_us(mi300x.cluster)) * 1e-6
    assert mla_decode_floor(mi300x, shape.blocks[0]) == pytest.approx(extra)
    assert mla_decode_floor(mi300x, LLAMA70B.blocks[0]) == 0.0
    assert mla_decode_floor(H100, shape.blocks[0]) == 0.0
    with_floor = decode_step_parts(mi300x, shape, Instance(tp=8), 10, 8704, "fp8", 2.0)
    without = decode_step_parts(replace(mi300x, rates=replace_rates(mi300x.rates)), shape, Instance(tp=8), 10, 8704, "fp8", 2.0)
    layers = sum(b.count for b in shape.blocks)
    assert with_floor.overhead - without.overhead == pytest.approx(layers * extra)


@pytest.mark.parametrize("gpu", ["mi300x", "mi325x"])
def test_aiters_measured_moe_rates_slow_deepseeks_experts_on_cdna3(gpu: str) -> None:
    """On gfx942 the fused block-scaled FP8 MoE streams its experts at 0.682 of the HBM peak and
    computes a prefill's routed experts at 937.26 TFLOP/s (ROCm/aiter tuned FMoE table, PR 3951):
    DeepSeek-R1's decode step and prefill both take longer than at the dense rates, NVIDIA's do not."""
    hw = Hardware(resolve_cluster_arg(f"{gpu}-8"), low_precision_rates(load_gpu(gpu)), ServingEfficiency())
    bare = replace(hw, rates=hw.rates.model_copy(update={"moe_stream_fraction": None, "moe_prefill_tflops": None}))
    shape, tp8 = model_shape(resolve_model_arg("deepseek-r1")), Instance(tp=8)
    assert hw.rates.moe_stream_fraction == 0.682 and hw.rates.moe_prefill_tflops == 937.26
    assert decode_step_parts(hw, shape, tp8, 10, 8704, "fp8", 2.0).traffic > 1.1 * decode_step_parts(bare, shape, tp8, 10, 8704, "fp8", 2.0).traffic
    assert prefill_time(hw, shape, tp8, 8192, 8192, "fp8") > prefill_time(bare, shape, tp8, 8192, 8192, "fp8")
    assert low_precision_rates(load_gpu("h200")).moe_stream_fraction is None


def replace_rates(rates: LowPrecisionRates) -> LowPrecisionRates:
    """``rates`` without a measured MLA decode floor."""
    return rates.model_copy(update={"mla_decode_floor_us": None})


def test_mla_and_shared_experts_add_their_decode_kernels() -> None:
    """DeepSeek-R1's MLA adds the latent norms, the query up-projection and the two absorbed batched
    GEMMs (5 kernels); its shared expert adds 3 under vLLM and none under TensorRT-LLM (aux stream)."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    moe = next(b for b in shape.blocks if b.layer.is_moe)
    assert mla_extra_kernels(moe) == 5 and mla_extra_kernels(LLAMA70B.blocks[0]) == 0
    vllm = DEFAULTS["vllm"]
    assert layer_kernels(H100, moe, Instance(tp=1)) == vllm.kernels_per_layer + vllm.moe_extra_kernels + 5 + 3
    trt = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["trtllm"])
    assert layer_kernels(trt, moe, Instance(tp=1)) == DEFAULTS["trtllm"].kernels_per_layer + DEFAULTS["trtllm"].moe_extra_kernels + 5


def test_sglang_folds_deepseeks_shared_expert_into_the_fused_moe_only_at_ep_1() -> None:
    """SGLang runs DeepSeek-R1's one shared expert (as wide as a routed one) as one more expert of
    the fused MoE at ep 1: no shared-expert GEMMs or FP8 quantisers of its own; under expert
    parallelism, or through TensorRT-LLM's fused MoE on Blackwell, it runs them in series as vLLM
    does."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    moe = next(b for b in shape.blocks if b.layer.is_moe)
    sgl = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["sglang"], fp8_block_scaled=True)
    vllm = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["vllm"], fp8_block_scaled=True)
    big = DEFAULTS["sglang"].shared_expert_stream_tokens + 1  # above SGLang's dual-stream threshold
    assert shared_expert_in_series(vllm, moe, Instance(tp=8)) and not shared_expert_in_series(sgl, moe, Instance(tp=8), big)
    assert shared_expert_in_series(sgl, moe, Instance(tp=8, ep=8), big)
    folded = layer_kernels(sgl, moe, Instance(tp=8), "fp8", big)
    series = layer_kernels(sgl, moe, Instance(tp=8, ep=8), "fp8", big)
    assert series - folded == DEFAULTS["sglang"].shared_expert_kernels + 2
    b200 = resolve_cluster_arg("dgx-b200")
    blackwell = Hardware(b200, low_precision_rates(load_gpu("b200")), ServingEfficiency(),
                         on_gpu(DEFAULTS["sglang"], blackwell=True, moe_model=True))
    assert shared_expert_in_series(blackwell, moe, Instance(tp=8), big)  # TensorRT-LLM's fused MoE routes in-kernel


def test_sglang_overlaps_an_unfolded_shared_expert_on_a_second_stream_for_small_steps_on_cuda() -> None:
    """SGLang's DeepSeek MoE runs a shared expert it did not fold on a second CUDA stream beside the routed experts
    for steps of at most 1,024 tokens (``forward_normal_dual_stream``): its kernels leave the critical path there,
    not above the threshold, not on ROCm (no ``alt_stream``), and vLLM keeps it in series."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    moe = next(b for b in shape.blocks if b.layer.is_moe)
    sgl = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["sglang"], fp8_block_scaled=True)
    vllm = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["vllm"], fp8_block_scaled=True)
    limit, ep8 = DEFAULTS["sglang"].shared_expert_stream_tokens, Instance(tp=8, ep=8)
    assert limit == 1024
    assert not shared_expert_in_series(sgl, moe, ep8, 64) and not shared_expert_in_series(sgl, moe, ep8, limit)
    assert shared_expert_in_series(sgl, moe, ep8, limit + 1) and shared_expert_in_series(vllm, moe, ep8, 64)
    rocm = Hardware(H100.cluster, H100.rates.model_copy(update={"platform": "rocm"}), H100.efficiency, DEFAULTS["sglang"],
                    fp8_block_scaled=True)
    assert shared_expert_in_series(rocm, moe, ep8, 64)
    small, large = layer_kernels(sgl, moe, ep8, "fp8", 64), layer_kernels(sgl, moe, ep8, "fp8", limit + 1)
    assert large - small == DEFAULTS["sglang"].shared_expert_kernels + 2  # its GEMMs, activation and FP8 quantisers
    step = lambda hw, c: decode_step_time(hw, shape, ep8, c, 1024.0, "fp8", 1.0)  # noqa: E731
    assert step(sgl, 64) < step(rocm, 64)


def test_experts_only_fp4_keeps_attention_bf16_and_runs_experts_at_the_activation_rate() -> None:
    """gpt-oss's checkpoint quantises only its experts (MXFP4, weight-only): the rest of each block
    stays bf16, and on Blackwell the expert GEMMs run at the engine's activation format (TensorRT-LLM
    MXFP8, vLLM bf16), never at the FP4 rate."""
    assert fp4_experts_only("gpt-oss-120b") and not fp4_experts_only("llama3.3-70b")
    cluster, rates = resolve_cluster_arg("dgx-b200"), low_precision_rates(load_gpu("b200"))
    nvfp4 = Hardware(cluster, rates, ServingEfficiency(), DEFAULTS["trtllm"])
    oss = Hardware(cluster, rates, ServingEfficiency(), DEFAULTS["trtllm"], fp4_experts_only=True)
    oss_vllm = Hardware(cluster, rates, ServingEfficiency(), DEFAULTS["vllm"], fp4_experts_only=True)
    assert dense_precision(oss, "fp4") == "bf16" and dense_precision(nvfp4, "fp4") == "fp4"
    assert expert_gemm_speedup(oss, "fp4") == pytest.approx(gemm_speedup(oss, "fp8"))
    assert expert_gemm_speedup(oss_vllm, "fp4") == 1.0
    assert expert_gemm_speedup(nvfp4, "fp4") == pytest.approx(gemm_speedup(nvfp4, "fp4"))
    shape = model_shape(resolve_model_arg("gpt-oss-120b"))
    whole = weights_bytes_per_gpu(shape, Instance(tp=4), "fp4", True, experts_only=True)
    assert whole > weights_bytes_per_gpu(shape, Instance(tp=4), "fp4", True)


def test_block_fp8_quantises_each_gemm_input_with_a_kernel_of_its_own() -> None:
    """DeepSeek-R1's FP8 checkpoint is block-scaled with dynamic 1 x 128 activation groups: an MoE
    layer quantises the inputs of its three MLA projections, two routed-expert GEMMs and (vLLM, in
    series) two shared-expert GEMMs; TensorRT-LLM overlaps the shared expert; other checkpoints none."""
    assert fp8_block_scaled("deepseek-r1") and not fp8_block_scaled("llama3.3-70b")
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    moe = next(b for b in shape.blocks if b.layer.is_moe)
    dense = next(b for b in shape.blocks if not b.layer.is_moe)
    vllm = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["vllm"], fp8_block_scaled=True)
    trt = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["trtllm"], fp8_block_scaled=True)
    one = Instance(tp=1)
    assert activation_quant_kernels(vllm, moe, one) == 7 and activation_quant_kernels(trt, moe, one) == 5
    assert activation_quant_kernels(vllm, dense, one) == 5 and activation_quant_kernels(H100, moe, one) == 0
    assert layer_kernels(vllm, moe, Instance(tp=1)) - layer_kernels(H100, moe, Instance(tp=1)) == 7


def test_moe_prefill_waits_for_a_busiest_rank_only_under_expert_parallelism() -> None:
    """With ep = 1 every GPU computes a 1/tp slice of every expert, so the busiest-rank factor
    (``moe_imbalance``) leaves prefill alone; with ep > 1 it stretches the MoE blocks."""
    shape = model_shape(resolve_model_arg("qwen3-235b-a22b"))
    skewed = Hardware(H100.cluster, LowPrecisionRates(), ServingEfficiency(moe_imbalance=3.0))
    for ep, same in ((1, True), (4, False)):
        plain = prefill_time(H100, shape, Instance(tp=4, ep=ep), 8192, 8192, "fp8")
        slow = prefill_time(skewed, shape, Instance(tp=4, ep=ep), 8192, 8192, "fp8")
        assert (slow == pytest.approx(plain)) is same
        assert slow >= plain


def test_moe_only_fp4_keeps_attention_and_dense_layers_bf16() -> None:
    """NVIDIA's DeepSeek-R1 FP4 checkpoint: NVFP4 on the MoE layers' experts (routed and shared),
    attention and the three dense layers bf16, so its weights sit between all-FP4 and all-bf16."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    inst = Instance(tp=8)
    dense_block, moe_block = shape.blocks[0], shape.blocks[-1]
    assert not dense_block.layer.is_moe and moe_block.layer.is_moe
    whole_dense = block_weight_params(dense_block, inst, 0.0)
    assert non_expert_bytes(dense_block, inst, "fp4", moe_only=True) == pytest.approx(whole_dense * 2.0)
    shared = moe_block.dense_params / inst.tp
    attention = block_weight_params(moe_block, inst, 0.0) - shared
    assert non_expert_bytes(moe_block, inst, "fp4", moe_only=True) == pytest.approx(
        attention * 2.0 + shared * NVFP4_BYTES_PER_PARAM)
    fp4 = weights_bytes_per_gpu(shape, inst, "fp4")
    mixed = weights_bytes_per_gpu(shape, inst, "fp4", moe_only=True)
    assert fp4 < mixed < weights_bytes_per_gpu(shape, inst, "fp8")


def test_a_short_prefill_chunk_through_a_large_moe_takes_at_least_its_weight_stream() -> None:
    """128 prompt tokens pick nearly every one of DeepSeek-R1's 256 experts (8 each), so the chunk's
    GEMMs read almost all expert weights on each GPU: the prefill lasts at least that stream, far
    more than its FLOPs alone; one token reads only its 8 experts."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    inst = Instance(tp=8)
    moe = next(b for b in shape.blocks if b.layer.is_moe)
    every = moe.layer.num_experts * moe.expert_params_each / inst.tp
    assert prefill_weight_bytes(H100, moe, inst, 128, "fp8") > 0.9 * every
    assert prefill_weight_bytes(H100, moe, inst, 1, "fp8") < prefill_weight_bytes(H100, moe, inst, 128, "fp8") / 10
    stream = sum(prefill_weight_bytes(H100, b, inst, 128, "fp8") * b.count for b in shape.blocks)
    assert prefill_time(H100, shape, inst, 128, 128, "fp8") >= stream / hbm_rate(H100, H100.efficiency.decode_memory)


def test_padded_mxfp4_experts_stream_more_only_on_the_triton_path() -> None:
    """Hopper has no FP4 tensor cores: gpt-oss's MXFP4 experts run OpenAI's triton_kernels MoE with
    each engine's padding (TensorRT-LLM's TRITON backend pads more than vLLM), while a GPU with
    FP4 tensor cores keeps the checkpoint's own shape."""
    shape = model_shape(resolve_model_arg("gpt-oss-120b"))
    block = next(b for b in shape.blocks if b.layer.is_moe)
    inst = Instance(tp=8)
    plain = block.expert_params_each / 8
    trt = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["trtllm"], fp4_experts_only=True)
    vllm = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["vllm"], fp4_experts_only=True)
    assert expert_shard_params(trt, block, inst, "fp4") > expert_shard_params(vllm, block, inst, "fp4") > plain
    assert expert_shard_params(trt, block, inst, "fp8") == pytest.approx(plain)
    b200 = resolve_cluster_arg("dgx-b200")
    blackwell = Hardware(b200, low_precision_rates(load_gpu("b200")), ServingEfficiency(), DEFAULTS["trtllm"],
                         fp4_experts_only=True)
    assert expert_shard_params(blackwell, block, inst, "fp4") == pytest.approx(plain)
    unpadded = Hardware(trt.cluster, trt.rates, trt.efficiency, replace(trt.engine, mxfp4_padding=(1, 1, 1, False)),
                        fp4_experts_only=True)
    assert decode_step_time(trt, shape, inst, 16, 1536, "fp4", 2.0) > decode_step_time(unpadded, shape, inst, 16, 1536, "fp4", 2.0)


def test_triton_kernels_moe_launches_its_routing_kernels_and_the_engines_own() -> None:
    """gpt-oss's MXFP4 experts on Hopper: the triton_kernels MoE's router, top-k, histogram and two
    sorting kernels replace the engine's fused-MoE count; TensorRT-LLM adds its activation pad."""
    block = next(b for b in model_shape(resolve_model_arg("gpt-oss-120b")).blocks if b.layer.is_moe)
    trt = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["trtllm"], fp4_experts_only=True)
    vllm = Hardware(H100.cluster, H100.rates, H100.efficiency, DEFAULTS["vllm"], fp4_experts_only=True)
    assert triton_mxfp4_moe(trt, "fp4") and not triton_mxfp4_moe(trt, "fp8")
    one = Instance(tp=1)
    assert layer_kernels(vllm, block, one, "fp4") == DEFAULTS["vllm"].kernels_per_layer + TRITON_MOE_KERNELS
    assert layer_kernels(trt, block, one, "fp4") == DEFAULTS["trtllm"].kernels_per_layer + TRITON_MOE_KERNELS + 1
    assert layer_kernels(trt, block, one, "fp8") == DEFAULTS["trtllm"].kernels_per_layer + DEFAULTS["trtllm"].moe_extra_kernels
    expert_parallel = layer_kernels(trt, block, Instance(tp=4, ep=2), "fp4") - layer_kernels(trt, block, Instance(tp=4), "fp4")
    assert expert_parallel == DEFAULTS["trtllm"].mxfp4_triton_ep_kernels == 3
