"""What each serving engine's defaults do to memory and batching, as data.

Each value names the engine's own flag and where its default is set. They bound the batch (KV
blocks, the scheduler's sequence cap, tokens per step) and decide what memory the KV cache gets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ServingEngine = Literal["vllm", "sglang", "trtllm"]
ENGINES: tuple[ServingEngine, ...] = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class EngineDefaults:
    """One engine's memory and scheduler defaults."""

    block_tokens: int
    """Tokens per KV cache block (page)."""
    memory_fraction: float
    """Share of memory the engine takes for weights + KV (or, with ``fraction_of_free``, for KV)."""
    fraction_of_free: bool
    """The fraction applies to the memory left after weights and workspace (TensorRT-LLM)."""
    max_batch: int
    """Scheduler cap on sequences in flight per instance."""
    max_num_tokens: int
    """Tokens one engine step may schedule (prefill chunk plus decode tokens)."""
    source: str
    kernels_per_layer: int = 10
    """Kernels a dense decoder layer's decode step launches besides its TP all-reduces (norms,
    GEMMs, rotary embedding, KV-cache write, attention, activation), each costing
    ``allreduce.kernel_floor_us`` beyond its bytes and FLOPs."""
    moe_extra_kernels: int = 4
    """Kernels an MoE layer adds over a dense MLP's (router GEMM, top-k, token permutation / expert
    alignment, finalize / un-permute)."""
    w4_activation: Literal["bf16", "fp8"] = "bf16"
    """Activation format of the expert GEMMs of a weight-only MXFP4 checkpoint (gpt-oss) on a GPU
    with FP4 tensor cores: the GEMM runs at that format's tensor-core rate, not the FP4 rate."""
    shared_expert_kernels: int = 3
    """Kernels a shared expert adds in series beside the routed experts (gate-up GEMM, activation,
    down GEMM); 0 where the engine runs the shared expert on a second stream, overlapped."""
    fuses_shared_expert: bool = False
    """The engine folds a shared expert as wide as a routed one into the routed experts' fused MoE
    kernel, as one more expert every token picks, when the experts are not split over ranks (ep 1):
    its gate-up GEMM, activation and down GEMM (and their FP8 input quantisers) are no separate
    kernels (SGLang ``DeepseekV2ForCausalLM.determine_num_fused_shared_experts``, on by default for
    DeepSeek-V3 / R1's one shared expert, off under expert parallelism; sgl-project/sglang PR 4918),
    in its own fused MoE only (``costmodel.serving.step.shared_expert_in_series``)."""
    shared_expert_stream_tokens: int = 0
    """Below this many tokens per forward step the engine runs a shared expert it did not fold into the fused MoE on
    a second CUDA stream beside the routed experts, so its kernels leave the step's critical path (its weights still
    stream); 0: never. SGLang 1024: ``DeepseekV2MoE.forward`` takes ``forward_normal_dual_stream`` when ``alt_stream``
    is set (CUDA only, ``torch.cuda.Stream()`` in ``DeepseekV2Model``; None on ROCm), no shared expert is fused
    (``num_fused_shared_experts == 0``) and the batch holds at most ``DUAL_STREAM_TOKEN_THRESHOLD`` = 1024 tokens
    (python/sglang/srt/models/deepseek_v2.py; ``Llama4MoE._forward_core`` overlaps its shared expert on CUDA the same
    way, ``_forward_core_shared_routed_overlap``, python/sglang/srt/models/llama4.py)."""
    fused_allreduce_norm: bool = False
    """The TP all-reduce also adds the residual and applies the next RMSNorm, so the separate
    add-and-norm kernel after each all-reduce disappears."""
    flashinfer_allreduce_fusion: bool = False
    """Each TP all-reduce and the residual add and RMSNorm after it run as FlashInfer's fused TensorRT-LLM all-reduce
    kernel (one-shot Lamport, two-shot above a size) up to a per-GPU-generation and TP-size message cap
    (``costmodel.serving.allreduce.FI_FUSION_MAX_MB``): vLLM ``PassConfig.fuse_allreduce_rms``. Off in the vLLM
    releases modelled here (v0.10-v0.12: ``OPTIMIZATION_LEVEL_02`` sets ``fuse_allreduce_rms`` False, vLLM v0.12.0 API
    docs ``vllm.config.vllm``; later releases turn it on at -O2 on Hopper / Blackwell with TP > 1, vLLM docs 'Fusion
    torch.compile passes'); set by :func:`on_gpu` where the engine's recipe turns it on."""
    blackwell_mxfp4_recipe: bool = False
    """The engine's own recipe for a weight-only MXFP4 checkpoint (gpt-oss) on Blackwell, which this model follows
    there: vLLM's ``OpenAI/GPT-OSS_Blackwell.yaml`` (vllm-project/recipes) sets ``compilation-config``
    ``pass_config.fuse_allreduce_rms`` true (``flashinfer_allreduce_fusion``; vllm-project/vllm PR 24248 moved the MoE
    layers' all-reduce out of the ``moe_forward`` custom op so that the pass matches it) and ``kv-cache-dtype`` fp8
    (:func:`recipe_kv_dtype`); its Hopper config sets neither (``GPT-OSS_Hopper.yaml``)."""
    trtllm_moe_tiles: bool = False
    """The routed experts run FlashInfer's trtllm-gen fused MoE (Blackwell only), whose token tile
    follows the tokens per expert (``costmodel.serving.moe.TRTLLM_TILE_ROWS``) rather than a fixed
    16-row block; set by :func:`on_gpu` (TensorRT-LLM's own default MoE backend is CUTLASS, kept at
    the 16-row block, but for a weight-only MXFP4 checkpoint, ``blackwell_mxfp4_trtllm_moe``)."""
    blackwell_trtllm_moe: bool = False
    """On Blackwell (SM100) GPUs the engine runs an MoE model's experts through TensorRT-LLM's fused
    MoE kernels (FlashInfer's trtllm-gen MoE: routing, grouped GEMMs, finalize), so it launches
    TensorRT-LLM's MoE kernel count (:func:`on_gpu`)."""
    blackwell_mxfp4_trtllm_moe: bool = False
    """On Blackwell the engine's default MoE backend for a weight-only MXFP4 checkpoint (gpt-oss) is
    its trtllm-gen fused MoE, whose token tile follows the tokens per expert (``trtllm_moe_tiles``):
    TensorRT-LLM's 'Deployment Guide for GPT-OSS on TensorRT-LLM - Blackwell Hardware' (1.2 / 1.4
    docs, MoE backend support matrix: B200 / GB200, MXFP8 activations, MXFP4 weights, backend TRTLLM
    for low latency and max throughput; 'For Blackwell, the default MoE backend is TRTLLM')."""
    dp_moe_allgather: bool = False
    """Under attention DP the MoE layer all-gathers every rank's (quantised) tokens with their top-k
    ids and weights, runs the experts on all of them, and reduce-scatters the outputs back to their
    ranks, instead of an all-to-all dispatch and combine (TensorRT-LLM ``CutlassFusedMoE`` /
    ``TRTLLMGenFusedMoE`` ``forward_chunk``: ``run_post_quant_allgather`` then
    ``reducescatter_or_allreduce``; its MNNVL all-to-all needs a multi-node NVLink domain, which a
    DGX / HGX node is not; :func:`costmodel.serving.comm.dp_gather_scatter`)."""
    blackwell_moe_allreduce_fusion: bool = False
    """On Blackwell the engine also fuses an MoE model's TP all-reduces with the residual add and
    RMSNorm (FlashInfer's TensorRT-LLM all-reduce fusion), dropping the separate add-and-norm."""
    kv_auto_from_checkpoint: bool = False
    """The KV-cache dtype 'auto' (the engine's default) is the model's own dtype unless the checkpoint
    states a KV quantisation, so a checkpoint without one runs a bf16 cache (vLLM ``CacheConfig``
    ``cache_dtype='auto'``, FP8 only from a ModelOpt ``kv_cache_quant_algo``, vllm-project/vllm PR
    29980; SGLang ``ServerArgs.kv_cache_dtype='auto'``: the model's dtype). False: the engine runs an
    FP8 cache with FP8 / FP4 weights (TensorRT-LLM's deployment recipes set ``kv_cache_config.dtype``
    fp8; its performance-overview runs are taken as FP8, ``planner.reference.serving_runs``)."""
    mxfp4_padding: tuple[int, int, int, bool] = (1, 1, 1, False)
    """How the engine pads a weight-only MXFP4 checkpoint's expert weights for OpenAI's
    ``triton_kernels`` MoE, its path on GPUs without FP4 tensor cores (Hopper, CDNA3): (multiple the
    intermediate width of each TP shard is rounded up to, multiple the hidden width is padded to as
    the gate-up GEMM's reduction dimension, multiple it is padded to as the down GEMM's output,
    whether the intermediate width is padded to that multiple times tp before the split). The padded
    rows and columns are zeros that every decode step still streams and multiplies
    (:func:`costmodel.serving.moe.mxfp4_padding_factor`)."""
    mxfp4_triton_extra_kernels: int = 0
    """Kernels the engine adds around the ``triton_kernels`` MoE per layer (TensorRT-LLM: the
    ``torch.nn.functional.pad`` of the activations to the padded reduction width,
    ``TritonMXFP4FusedMoEMethod.apply``)."""
    mxfp4_triton_ep_kernels: int = 0
    """Kernels the engine adds to the ``triton_kernels`` routing under expert parallelism (ep > 1),
    to keep a rank's own experts (TensorRT-LLM ``TritonEPRouter.prune_routing_ep``: the bit-matrix
    shift, its clear and a compaction)."""
    mxfp4_padding_rocm: tuple[int, int, int, bool] | None = None
    """:attr:`mxfp4_padding` on ROCm where the engine pads differently there (None: the same)."""
    host_us_per_request: float = 0.0
    """Host (CPU) microseconds the engine's executor loop spends per request it holds, per step,
    overlapped with the GPU's step (:mod:`costmodel.serving.host`); 0 where no figure is published."""
    kernel_source: str = ""
    name: str = "vllm"
    """The engine these defaults belong to (its all-reduce choice, ``costmodel.serving.allreduce``)."""


TRTLLM_HOST_US_PER_REQUEST = 45.11e3 / 1536
"""TensorRT-LLM PyTorch backend host time per request per step: NVIDIA/TensorRT-LLM PR 10273
(re-implementing the capacity and micro-batch schedulers in Python) measured 45.11 ms of average
``host_step_time`` per iteration with the C++ scheduler, gpt-oss-120b on GB200 at max throughput,
attention DP over 2 ranks with ``max_batch_size`` 1536 and 3,072 requests in flight (1,536 per
rank), a configuration the PR names host-bound; 45.11 ms / 1,536 = 29.4 µs per request.
``host_step_time`` is the iteration's wall time (``PyExecutor._profiler``: ``time.time()`` around
the iteration), which is the host's work there: swapping in the slower Python scheduler lengthened
the iteration (45.11 -> 46.02 ms) and cut throughput 1.3 %, which an overlapped step would hide if
the GPU were the longer side (this model prices that GPU step, prefills included, at about 43 ms).
Taken as the same on every host CPU and TensorRT-LLM 1.x release, and as all per request (no fixed
part per step) [assumption]."""


DEFAULTS: dict[ServingEngine, EngineDefaults] = {
    "vllm": EngineDefaults(
        name="vllm",
        block_tokens=16, memory_fraction=0.90, fraction_of_free=False, max_batch=1024, max_num_tokens=8192,
        source="vLLM v0.10 EngineArgs: block_size 16 (CacheConfig), gpu_memory_utilization 0.9, V1 defaults "
               "max_num_seqs 1024 / max_num_batched_tokens 8192 for the API server on >= 70 GiB GPUs "
               "(vllm/engine/arg_utils.py, _set_default_args_v1)",
        kernels_per_layer=10, moe_extra_kernels=4, fused_allreduce_norm=False, blackwell_trtllm_moe=True,
        blackwell_mxfp4_recipe=True, kv_auto_from_checkpoint=True, mxfp4_padding=(64, 1, 1, False),
        mxfp4_padding_rocm=(128, 1, 1, False),
        kernel_source="vLLM V1 Llama decode under CUDA graphs: fused_add_rms_norm x2, qkv GEMM, rotary_embedding, "
                      "reshape_and_cache, attention, o_proj, gate_up GEMM, silu_and_mul, down GEMM (vllm/model_executor/"
                      "models/llama.py; custom all-reduce separate, csrc/custom_all_reduce.cuh); fused_moe adds router, "
                      "topk_softmax, moe_align_block_size and the weighted sum (vllm/model_executor/layers/fused_moe); "
                      "gpt-oss's MXFP4 experts take bf16 activations by default on Blackwell (vllm mxfp4.py "
                      "get_mxfp4_backend: SM100_FI_MXFP4_BF16, FlashInfer's TensorRT-LLM BF16 x FP4 fused MoE, unless "
                      "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 is set)"),
    "sglang": EngineDefaults(
        name="sglang",
        block_tokens=1, memory_fraction=0.88, fraction_of_free=False, max_batch=4096, max_num_tokens=8192,
        source="SGLang v0.4 ServerArgs: page_size 1, mem_fraction_static ~0.88 for 80-160 GB GPUs at tp 1-8, "
               "chunked_prefill_size 8192, max_running_requests derived from the KV pool (capped here at 4096) "
               "(python/sglang/srt/server_args.py)",
        kernels_per_layer=9, moe_extra_kernels=4, fused_allreduce_norm=False, blackwell_trtllm_moe=True,
        blackwell_moe_allreduce_fusion=True, fuses_shared_expert=True, shared_expert_stream_tokens=1024,
        kv_auto_from_checkpoint=True,
        mxfp4_padding=(32, 1, 1, False),
        kernel_source="SGLang Llama decode under CUDA graphs: fused add-RMSNorm x2, qkv GEMM, rotary fused with the "
                      "KV write (FlashInfer / FA3 backends), attention, o_proj, gate_up GEMM, SiluAndMul, down GEMM "
                      "(python/sglang/srt/models/llama.py); MoE adds router, top-k, align and combine (layers/moe); "
                      "MXFP4 experts with bf16 activations as vLLM's default [assumption]; on SM100 DeepSeek-V3/R1 and "
                      "gpt-oss default to FlashInfer's TensorRT-LLM all-reduce fusion (enable_flashinfer_allreduce_fusion, "
                      "single node, no DP attention) and MoE runner flashinfer_trtllm / flashinfer_mxfp4 (python/sglang/srt/"
                      "server_args.py, _handle_model_specific_adjustments)"),
    "trtllm": EngineDefaults(
        name="trtllm",
        block_tokens=32, memory_fraction=0.90, fraction_of_free=True, max_batch=8192, max_num_tokens=8192,
        source="TensorRT-LLM v1.0 KvCacheConfig: tokens_per_block 32, free_gpu_memory_fraction 0.9 of the "
               "memory free after weights; trtllm-bench max-throughput runs with CUDA-graph batches up to "
               "8192 and max_num_tokens 8192 (docs/source/performance/perf-overview.md)",
        kernels_per_layer=7, moe_extra_kernels=3, shared_expert_kernels=0, fused_allreduce_norm=True,
        w4_activation="fp8", mxfp4_padding=(128, 128, 256, True), mxfp4_triton_extra_kernels=1,
        mxfp4_triton_ep_kernels=3, host_us_per_request=TRTLLM_HOST_US_PER_REQUEST, blackwell_mxfp4_trtllm_moe=True,
        dp_moe_allgather=True,
        kernel_source="TensorRT-LLM PyTorch backend decode under CUDA graphs: qkv GEMM, attention with rotary and KV "
                      "write fused (XQA / trtllm-gen), o_proj, add-RMSNorm, gate_up GEMM with fused SwiGLU, down GEMM, "
                      "add-RMSNorm; with TP the add-RMSNorm runs inside the all-reduce (AllReduceFusionOp."
                      "RESIDUAL_RMS_NORM, tensorrt_llm/_torch/distributed/ops.py); fused MoE adds router, top-k and "
                      "finalize (tensorrt_llm/_torch/modules/fused_moe); DeepSeek's shared experts run on an auxiliary "
                      "stream beside the routed ones (modeling_deepseekv3.py, maybe_execute_in_parallel with aux_stream); "
                      "gpt-oss's MXFP4 experts run with MXFP8 activations on Blackwell (TensorRT-LLM 'Deployment Guide for "
                      "GPT-OSS', MoE backend support matrix: W4A8_MXFP4_MXFP8)"),
}
"""The MXFP4 paddings (``mxfp4_padding``) are each engine's ``create_weights`` for its triton_kernels
MoE: vLLM ``Mxfp4MoEMethod`` rounds each shard's intermediate width up to 64 (128 on ROCm); SGLang
``Mxfp4MoEMethod`` (``has_triton_kernels``) to the 32-element MXFP4 block; TensorRT-LLM's default
MoE backend on Hopper for gpt-oss is TRITON (its 'Deployment Guide for GPT-OSS', MoE backend support
matrix: H200, BF16 activations, MXFP4 weights), whose ``TritonMXFP4FusedMoEMethod`` pads the
hidden width to ``k_alignment`` 128 as a reduction dimension and to ``n_alignment`` 256 as an output,
and ``shard_and_pad_tensor`` pads the intermediate width to 128 x tp before splitting it
(``tensorrt_llm/_torch/modules/fused_moe/fused_moe_triton.py``)."""


def shared_expert_overlapped(engine: EngineDefaults, platform: str, tokens: float | None) -> bool:
    """The engine runs an unfolded shared expert on a second stream for a step of ``tokens`` tokens per GPU
    (:attr:`EngineDefaults.shared_expert_stream_tokens`; CUDA only; None: a step below the threshold)."""
    limit = engine.shared_expert_stream_tokens
    return limit > 0 and platform != "rocm" and (tokens is None or tokens <= limit)


def recipe_kv_dtype(engine: EngineDefaults, blackwell: bool, mxfp4_experts: bool) -> str | None:
    """The KV-cache dtype the engine's recipe sets for the model on the GPU (``blackwell_mxfp4_recipe``: FP8 for a
    weight-only MXFP4 checkpoint on Blackwell), None where it sets none."""
    return "fp8" if blackwell and mxfp4_experts and engine.blackwell_mxfp4_recipe else None


def on_gpu(engine: EngineDefaults, blackwell: bool, moe_model: bool, mxfp4_experts: bool = False) -> EngineDefaults:
    """``engine``'s decode kernels for a model on a GPU. On Blackwell an MoE model runs
    TensorRT-LLM's fused MoE where the engine has ``blackwell_trtllm_moe`` (TensorRT-LLM's MoE kernel
    count; vLLM ``mxfp4.py`` ``get_mxfp4_backend`` picks SM100_FI_MXFP4_BF16 there, SGLang
    ``server_args.py`` the ``flashinfer_trtllm`` / ``flashinfer_mxfp4`` runners for DeepSeek-V3/R1
    and gpt-oss on sm100) and, with ``blackwell_moe_allreduce_fusion``, fuses its all-reduces with
    the residual add and RMSNorm (SGLang switches ``enable_flashinfer_allreduce_fusion`` on there).
    A weight-only MXFP4 checkpoint (``mxfp4_experts``) on Blackwell takes the trtllm-gen tiles
    where the engine has ``blackwell_mxfp4_trtllm_moe``, and FlashInfer's fused all-reduce + RMSNorm where its
    recipe turns it on (``blackwell_mxfp4_recipe``). Other engines, GPUs and dense models keep ``engine``."""
    if blackwell and mxfp4_experts and engine.blackwell_mxfp4_recipe:
        engine = replace(engine, flashinfer_allreduce_fusion=True)
    if blackwell and moe_model and mxfp4_experts and engine.blackwell_mxfp4_trtllm_moe:
        return replace(engine, trtllm_moe_tiles=True)
    if not (blackwell and moe_model and engine.blackwell_trtllm_moe):
        return engine
    fused = engine.fused_allreduce_norm or engine.blackwell_moe_allreduce_fusion
    return replace(engine, fused_allreduce_norm=fused, moe_extra_kernels=DEFAULTS["trtllm"].moe_extra_kernels,
                   trtllm_moe_tiles=True)
