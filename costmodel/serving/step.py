"""Time of one prefill chunk and one decode step of a serving instance.

Prefill is compute: the blocks' GEMMs at the weight precision's tensor-core rate
(``costmodel.kernels.gemm_time``) and causal FlashAttention (``costmodel.kernels.attention_time``).
Decode is memory traffic: each step streams the GPU's weight shard once for the whole batch (the
batch amortises it) and every sequence's KV cache, against the compute ceiling of the same GEMMs
(roofline, Williams et al. CACM 2009; the decode analysis of Pope et al., MLSys'23 §2 and of
"LLM Inference Unveiled", Yuan et al. arXiv:2402.16363 §3). MoE decode streams only the experts some
token of the batch picked: E·(1 − (1 − k/E)^b) of E experts for b tokens under uniform routing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodel.kernels import attention_time, gemm_time
from costmodel.precision import fp8_gemm_speedup
from costmodel.serving.allreduce import decode_all_reduce, fuses_add_norm, kernel_floor_us
from costmodel.serving.comm import dispatch_element_bytes, dp_gather_scatter, ep_all_to_all, gathers_for_dp, pp_hand_off
from costmodel.serving.engines import DEFAULTS, EngineDefaults, shared_expert_overlapped
from costmodel.serving.hbm import DENSE_WEIGHT_GEMMS, EXPERT_GEMMS, expert_stream_rate, stream_seconds
from costmodel.serving.kvcache import block_kv_bytes_per_token
from costmodel.serving.moe import (busiest_rank_experts, fused_moe_prefill_seconds, mxfp4_padding_factor, padded_expert_rows,
                                   routed_row_bytes)
from costmodel.serving.shape import BlockShape, ModelShape, block_forward_flops, decode_core_width, dense_gemm_flops
from costmodel.serving.specs import (
    Instance,
    LowPrecisionRates,
    ServingEfficiency,
    WeightPrecision,
    weight_bytes,
)
from costmodel.specs import ClusterSpec

EMBEDDING_BYTES = 2.0
"""Embedding and output head stay bf16 in FP8 and FP4 checkpoints (NVIDIA ModelOpt quantises the blocks' linear layers;
``lm_head`` is excluded by default)."""


@dataclass(frozen=True)
class Hardware:
    """Everything the serving cost functions read about the machine."""

    cluster: ClusterSpec
    rates: LowPrecisionRates
    efficiency: ServingEfficiency
    engine: EngineDefaults = DEFAULTS["vllm"]
    """The serving engine: its kernels per layer and all-reduce algorithms."""
    fp4_experts_only: bool = False
    """The FP4 checkpoint is weight-only MXFP4 on the routed experts alone (gpt-oss: attention, router
    and head stay bf16; ``profiles/serving.json`` ``checkpoints``)."""
    fp4_moe_only: bool = False
    """The FP4 checkpoint is NVFP4 on the MoE layers' experts alone, routed and shared: attention and
    the dense layers stay bf16 (NVIDIA's DeepSeek-R1 FP4 checkpoints; ``profiles/serving.json``
    ``checkpoints``)."""
    fp8_block_scaled: bool = False
    """The FP8 checkpoint is block-scaled with dynamic 1 x 128 activation groups (DeepSeek-V3 / R1):
    each FP8 GEMM's input is quantised by a kernel of its own (:func:`activation_quant_kernels`)."""


def mx_storage(hw: Hardware, precision: WeightPrecision) -> bool:
    """FP4 weights are stored as MXFP4 (32-element E8M0 scales) where the GPU has no NVFP4 tensor
    cores: AMD CDNA4, and Hopper running weight-only FP4 checkpoints such as gpt-oss's MXFP4 experts
    (dequantised in the GEMM: vLLM / SGLang Marlin and triton ``matmul_ogs`` MXFP4 kernels)."""
    return precision == "fp4" and (hw.rates.mx_blocks or hw.rates.peak_fp4_tflops is None or hw.fp4_experts_only)


def dense_precision(hw: Hardware, precision: WeightPrecision) -> WeightPrecision:
    """Format of a block's non-expert weights: bf16 in an experts-only FP4 checkpoint."""
    return "bf16" if precision == "fp4" and hw.fp4_experts_only else precision


def expert_gemm_speedup(hw: Hardware, precision: WeightPrecision) -> float:
    """Rate of the routed experts' GEMMs over bf16: a weight-only FP4 expert on FP4 tensor cores runs
    at the engine's activation format (``EngineDefaults.w4_activation``), else :func:`gemm_speedup`."""
    if precision == "fp4" and hw.fp4_experts_only and hw.rates.peak_fp4_tflops is not None:
        return gemm_speedup(hw, hw.engine.w4_activation)
    return gemm_speedup(hw, precision)


def gemm_speedup(hw: Hardware, precision: WeightPrecision) -> float:
    """GEMM rate at ``precision`` over bf16 at the measured ceilings: FP8 per
    :func:`costmodel.precision.fp8_gemm_speedup`; FP4 as the FP4 peak at the FP8 MAMF fraction times
    ``ServingEfficiency.low_precision_gemm``. Raises ValueError where the GPU lacks the format."""
    if precision == "bf16":
        return 1.0
    if precision == "fp8":
        return fp8_gemm_speedup(hw.cluster)
    gpu = hw.cluster.gpu
    if hw.rates.peak_fp4_tflops is None:  # weight-only FP4: dequantised to bf16 in the GEMM
        return 1.0
    fp4 = hw.rates.peak_fp4_tflops * (gpu.fp8_mamf_fraction or 1.0) * hw.efficiency.low_precision_gemm
    return fp4 / (gpu.peak_bf16_tflops * (gpu.bf16_mamf_fraction or 1.0))


DEQUANT_TILE_ROWS = 32
"""Batch rows per output tile of the FP4-upcasting GEMM at decode shapes: the 32 x 256 x 128 tile
that ROCm/triton issue #970 profiles for the gfx942 MXFP4 MoE GEMM; each row-block of a tile
upcasts its weight tile again (the fused loop re-dequantises per output M-block)."""


def hbm_rate(hw: Hardware, fraction: float) -> float:
    """Bytes/s a large decode stream reaches: the HBM peak times the fitted ``fraction``, at most the
    GPU's measured stream ceiling (``LowPrecisionRates.hbm_stream_fraction``)."""
    ceiling = hw.rates.hbm_stream_fraction
    return hw.cluster.gpu.hbm_bandwidth_gbps * 1e9 * (fraction if ceiling is None else min(fraction, ceiling))


def dequant_seconds(hw: Hardware, precision: WeightPrecision, weights: float, rows: float) -> float:
    """Seconds the vector ALUs spend upcasting ``weights`` FP4 weights to bf16 for a GEMM of
    ``rows`` batch rows, on a GPU whose FP4 weights have no FP4 tensor-core or Marlin-class kernel
    (``LowPrecisionRates.fp4_dequant_weights_per_s``); 0 elsewhere."""
    rate = hw.rates.fp4_dequant_weights_per_s
    if precision != "fp4" or rate is None or weights <= 0:
        return 0.0
    return weights * math.ceil(max(rows, 1.0) / DEQUANT_TILE_ROWS) / rate


def block_weight_params(block: BlockShape, instance: Instance, experts_touched: float | None = None) -> float:
    """Parameters of one block on one GPU: attention whole under attention DP, else its TP split
    (MLA down-projections and norms whole); dense MLP / router / shared expert over tp; routed experts
    over tp (ep·(tp/ep) ways). ``experts_touched`` counts only that many routed experts (decode)."""
    attn = block.attention_params
    if not instance.attention_dp:
        attn = block.replicated_attention_params + (attn - block.replicated_attention_params) / instance.tp
    experts = block.layer.num_experts if experts_touched is None else experts_touched
    return attn + (block.dense_params + experts * block.expert_params_each) / instance.tp


def non_expert_bytes(block: BlockShape, instance: Instance, precision: WeightPrecision, mx: bool = False,
                     experts_only: bool = False, moe_only: bool = False) -> float:
    """Bytes of one block's weights besides its routed experts on one GPU (attention, dense MLP or
    shared expert, router). An FP4 checkpoint that quantises only the routed experts
    (``experts_only``) keeps all of them bf16; one that quantises only the MoE layers' experts
    (``moe_only``) keeps attention and the dense layers bf16 and its shared expert FP4."""
    params = block_weight_params(block, instance, 0.0)
    if precision != "fp4" or not (experts_only or moe_only):
        return params * weight_bytes(precision, mx)
    dense = block.dense_params / instance.tp
    dense_format: WeightPrecision = "fp4" if moe_only and block.layer.is_moe else "bf16"
    return (params - dense) * weight_bytes("bf16") + dense * weight_bytes(dense_format, mx)


def weights_bytes_per_gpu(shape: ModelShape, instance: Instance, precision: WeightPrecision, mx: bool = False,
                          experts_only: bool = False, moe_only: bool = False) -> float:
    """Weight bytes on the busiest GPU: 1/pp of the blocks, plus the embedding and the head (TP-split,
    bf16) as if on one stage (the first and last stage hold one each). ``experts_only`` /
    ``moe_only``: an FP4 checkpoint that leaves part of each block bf16 (:func:`non_expert_bytes`)."""
    edges = (shape.embedding_params + shape.head_params) / instance.tp / (2 if instance.pp > 1 else 1)
    if (experts_only or moe_only) and precision == "fp4":
        rest = sum(non_expert_bytes(b, instance, precision, mx, experts_only, moe_only) * b.count for b in shape.blocks)
        experts = sum((block_weight_params(b, instance) - block_weight_params(b, instance, 0.0)) * b.count
                      for b in shape.blocks)
        return (rest + experts * weight_bytes(precision, mx)) / instance.pp + edges * EMBEDDING_BYTES
    blocks = sum(block_weight_params(b, instance) * b.count for b in shape.blocks) / instance.pp
    return blocks * weight_bytes(precision, mx) + edges * EMBEDDING_BYTES


def _block_comm(hw: Hardware, block: BlockShape, instance: Instance, tokens: float, precision: WeightPrecision) -> float:
    """TP all-reduces (the engine's algorithm, :mod:`costmodel.serving.allreduce`), or under attention
    DP the MoE layer's EP all-to-alls or the engine's all-gather and reduce-scatter
    (:func:`costmodel.serving.comm.gathers_for_dp`), for ``tokens`` tokens."""
    h, engine, k = block.layer.hidden_size, hw.engine.name, block.layer.moe_top_k
    if instance.attention_dp and block.layer.is_moe and gathers_for_dp(hw.engine.dp_moe_allgather, hw.cluster, instance.ep, k):
        fp4_cores = hw.rates.peak_fp4_tflops is not None
        element = dispatch_element_bytes(precision, hw.fp4_experts_only, fp4_cores, hw.fp8_block_scaled)
        return dp_gather_scatter(hw.cluster, instance.tp, tokens, h, k, element)
    if instance.attention_dp and block.layer.is_moe:
        return ep_all_to_all(hw.cluster, instance.tp, tokens / instance.tp, h, k)
    fusion = hw.engine.flashinfer_allreduce_fusion
    if instance.attention_dp:  # gather before and scatter after the dense MLP
        return decode_all_reduce(hw.cluster, engine, instance.tp, tokens, h, fusion)
    return 2.0 * decode_all_reduce(hw.cluster, engine, instance.tp, tokens, h, fusion)


def mla_extra_kernels(block: BlockShape) -> int:
    """Kernels MLA's absorbed decode adds over a GQA layer's: the RMSNorm of the compressed KV
    latent, the two batched GEMMs that absorb W^UK into the query and W^UV into the output, and,
    with a low-rank query (``q_lora_rank``), the query latent's RMSNorm and its up-projection GEMM
    (DeepSeek-V2 arXiv:2405.04434 §2.1.2-2.1.3; vLLM ``MLACommonImpl`` / SGLang
    ``DeepseekV2AttentionMLA.forward_absorb`` launch these one by one)."""
    layer = block.layer
    if not layer.is_mla:
        return 0
    return 3 + (2 if layer.q_lora_rank else 0)


def shared_expert_in_series(hw: Hardware, block: BlockShape, instance: Instance, tokens: float | None = None) -> bool:
    """A shared expert launches kernels of its own on the step's critical path: the engine runs it in series
    (``EngineDefaults.shared_expert_kernels``), not on a second stream for ``tokens`` tokens per GPU (``engines.
    shared_expert_overlapped``), and does not fold it into the fused MoE, which it does only for a shared expert as
    wide as a routed one at ep 1 (``EngineDefaults.fuses_shared_expert``), and not through TensorRT-LLM's fused MoE
    (``trtllm_moe_tiles``), which routes in-kernel from the routed experts' logits alone (FlashInfer
    ``trtllm_fp4/fp8_block_scale_moe`` take ``routing_logits`` and the DeepSeek-V3 grouped top-k)."""
    layer, engine = block.layer, hw.engine
    if not (layer.is_moe and layer.shared_expert_ffn_hidden_size and engine.shared_expert_kernels):
        return False
    same_width = layer.shared_expert_ffn_hidden_size == layer.ffn_hidden_size
    folded = engine.fuses_shared_expert and not engine.trtllm_moe_tiles and instance.ep == 1 and same_width
    return not folded and not shared_expert_overlapped(engine, hw.rates.platform, tokens)


def activation_quant_kernels(hw: Hardware, block: BlockShape, instance: Instance, tokens: float | None = None) -> int:
    """Kernels that quantise a GEMM input per 1 x 128 group before each block-scaled FP8 GEMM of a decode layer
    (``Hardware.fp8_block_scaled``): vLLM / SGLang ``apply_w8a8_block_fp8_linear`` call
    ``per_token_group_quant_fp8`` before ``w8a8_block_fp8_matmul``, TensorRT-LLM ``fp8_quantize_1x128`` before
    ``fp8_block_scaling_gemm``, and the fused MoE quantises both of its GEMMs' inputs. One per attention projection
    input (MLA: the fused q/kv down-projection, the query up-projection, the output projection; GQA: QKV and
    output), two for a dense MLP, two for the routed experts and two for a shared expert the engine runs in series."""
    if not hw.fp8_block_scaled:
        return 0
    layer = block.layer
    attention = 3 if layer.is_mla else 2
    if not layer.is_moe:
        return attention + 2
    shared = 2 if shared_expert_in_series(hw, block, instance, tokens) else 0
    return attention + 2 + shared


def layer_kernels(hw: Hardware, block: BlockShape, instance: Instance, precision: WeightPrecision = "bf16",
                  tokens: float | None = None) -> int:
    """Kernels one decode layer launches besides its all-reduces (``EngineDefaults.kernels_per_layer``, plus the MoE
    and shared-expert kernels, MLA's, :func:`mla_extra_kernels`, and block-FP8's activation quantisers,
    :func:`activation_quant_kernels`), less the two add-and-norm kernels where the all-reduces fuse them
    (:func:`costmodel.serving.allreduce.fuses_add_norm`). An MoE layer on the ``triton_kernels`` path
    (:func:`triton_mxfp4_moe`) launches :data:`TRITON_MOE_KERNELS` plus the engine's own around it
    (``mxfp4_triton_extra_kernels``, and ``mxfp4_triton_ep_kernels`` under EP) instead of its fused MoE's."""
    engine, layer = hw.engine, block.layer
    moe = engine.moe_extra_kernels
    if triton_mxfp4_moe(hw, precision):
        moe = TRITON_MOE_KERNELS + engine.mxfp4_triton_extra_kernels + (engine.mxfp4_triton_ep_kernels if instance.ep > 1 else 0)
    kernels = engine.kernels_per_layer + (moe if layer.is_moe else 0) + mla_extra_kernels(block)
    kernels += activation_quant_kernels(hw, block, instance, tokens)
    if shared_expert_in_series(hw, block, instance, tokens):
        kernels += engine.shared_expert_kernels
    fused = fuses_add_norm(hw.cluster, engine, instance.tp, instance.attention_dp, layer.hidden_size, tokens)
    return kernels - 2 if fused else kernels


@dataclass(frozen=True)
class StepParts:
    """Where a decode step's time goes (seconds). Each kernel runs at its own roofline, the longer of
    its bytes over HBM bandwidth and its FLOPs over the tensor-core rate (Williams et al., CACM 2009),
    and the step's kernels run one after another (``busy``, the sum of those maxima); ``traffic`` and
    ``compute`` total the two sides for the bottleneck report. Communication and the kernels' fixed
    costs add."""

    traffic: float = 0.0
    compute: float = 0.0
    comm: float = 0.0
    overhead: float = 0.0
    busy: float = 0.0

    @classmethod
    def kernel(cls, traffic: float, compute: float, sharpness: float = float("inf")) -> "StepParts":
        """One kernel (or a class of kernels): the p-norm of its traffic and compute times, the
        roofline's max(T, C) as p grows and a partial overlap near the ridge point, where a kernel
        neither streams at full bandwidth nor computes at full rate (Hong and Kim, ISCA'09 §4:
        memory and compute waits overlap only partly when neither saturates)."""
        if traffic <= 0 or compute <= 0 or sharpness == float("inf"):
            return cls(traffic=traffic, compute=compute, busy=max(traffic, compute))
        top = max(traffic, compute)
        busy = top * ((traffic / top) ** sharpness + (compute / top) ** sharpness) ** (1.0 / sharpness)
        return cls(traffic=traffic, compute=compute, busy=busy)

    @property
    def total(self) -> float:
        return self.busy + self.comm + self.overhead

    def __add__(self, other: "StepParts") -> "StepParts":
        return StepParts(self.traffic + other.traffic, self.compute + other.compute, self.comm + other.comm,
                         self.overhead + other.overhead, self.busy + other.busy)

    def scaled(self, factor: float) -> "StepParts":
        return StepParts(self.traffic * factor, self.compute * factor, self.comm * factor, self.overhead * factor,
                         self.busy * factor)


def triton_mxfp4_moe(hw: Hardware, precision: WeightPrecision) -> bool:
    """The routed experts run OpenAI's ``triton_kernels`` MoE (``matmul_ogs``): a weight-only MXFP4
    checkpoint (gpt-oss) on a GPU without FP4 tensor cores (vLLM ``get_mxfp4_backend`` on Hopper and
    ROCm; SGLang ``has_triton_kernels``; TensorRT-LLM's default TRITON MoE backend on Hopper)."""
    return precision == "fp4" and hw.fp4_experts_only and hw.rates.peak_fp4_tflops is None


TRITON_MOE_KERNELS = 5
"""Kernels the ``triton_kernels`` MoE launches per layer besides its two ``matmul_ogs`` expert
GEMMs: the router GEMM, ``topk``, the bit-matrix histogram (``bitmatrix.sum``), and ``sort_tokens``'
``_combined_routing_memset`` and ``_combined_routing_compute``; the gather of each expert's rows
and the router-weighted scatter back run inside the GEMMs (triton-lang/triton
``python/triton_kernels/triton_kernels/routing.py``, ``matmul_ogs`` ``gather_indx`` /
``scatter_indx`` / ``gammas``)."""


def expert_shard_params(hw: Hardware, block: BlockShape, instance: Instance, precision: WeightPrecision) -> float:
    """Weight elements of one routed expert on one GPU: its 1/(tp/ep) tensor-parallel slice, padded
    as the engine pads a weight-only MXFP4 checkpoint for the ``triton_kernels`` MoE
    (:func:`triton_mxfp4_moe`; ``EngineDefaults.mxfp4_padding``, :func:`mxfp4_padding_factor`)."""
    shards = instance.tp // instance.ep
    each = block.expert_params_each / shards
    if not triton_mxfp4_moe(hw, precision):
        return each
    engine = hw.engine
    rule = engine.mxfp4_padding_rocm if hw.rates.platform == "rocm" and engine.mxfp4_padding_rocm else engine.mxfp4_padding
    return each * mxfp4_padding_factor(block, shards, rule)


def _expert_parts(hw: Hardware, block: BlockShape, instance: Instance, batch: float, precision: WeightPrecision) -> tuple[float, float]:
    """(weight bytes, GEMM seconds) of the routed experts on the busiest GPU for a decode step of
    ``batch`` tokens (:mod:`costmodel.serving.moe`)."""
    touched = busiest_rank_experts(block, instance, batch)
    each = expert_shard_params(hw, block, instance, precision)
    nbytes = touched * each * weight_bytes(precision, mx_storage(hw, precision))
    flops = 2.0 * each * padded_expert_rows(block, instance, batch, touched, hw.engine.trtllm_moe_tiles)
    seconds = gemm_time(hw.cluster, flops, expert_gemm_speedup(hw, precision)) / hw.efficiency.prefill_compute
    rows = batch * block.layer.moe_top_k / instance.ep / touched if touched > 0 else 0.0
    return nbytes, max(seconds, dequant_seconds(hw, precision, touched * each, rows))


def decode_block_parts(hw: Hardware, block: BlockShape, instance: Instance, batch: float, context: float,
                       precision: WeightPrecision, kv_element_bytes: float) -> StepParts:
    """One block in a decode step of ``batch`` sequences of mean ``context`` tokens: weight + KV
    traffic (each kernel at the HBM rate its transfer size reaches, :mod:`costmodel.serving.hbm`),
    GEMM + attention compute, communication and the kernels' fixed costs. Routed experts
    count only those some token touched, on the busiest GPU (:mod:`costmodel.serving.moe`); the
    attention core reads only the window of a sliding-window layer, MLA's latent cache with its
    absorbed decode width (:func:`costmodel.serving.shape.decode_core_width`)."""
    gpu, eff = hw.cluster.gpu, hw.efficiency
    bandwidth = hbm_rate(hw, eff.decode_memory)
    dense_fmt = dense_precision(hw, precision)
    weights = non_expert_bytes(block, instance, precision, mx_storage(hw, precision), hw.fp4_experts_only, hw.fp4_moe_only)
    gemm = dense_gemm_flops(block, batch / instance.tp)
    ridge = eff.roofline_sharpness
    gemm_seconds = gemm_time(hw.cluster, gemm, gemm_speedup(hw, dense_fmt)) / eff.prefill_compute
    gemm_seconds = max(gemm_seconds, dequant_seconds(hw, dense_fmt, block_weight_params(block, instance, 0.0), batch))
    dense = StepParts.kernel(stream_seconds(weights, DENSE_WEIGHT_GEMMS, bandwidth), gemm_seconds, ridge)
    seqs = batch / instance.tp if instance.attention_dp else batch
    kept = min(context, block.window) if block.window else context
    kv = seqs * kept * block_kv_bytes_per_token(block, instance, kv_element_bytes)
    core = 2.0 * batch * kept * decode_core_width(block) / instance.tp
    kv_bandwidth = hbm_rate(hw, eff.kv_memory)
    attention = StepParts.kernel(stream_seconds(kv, 1, kv_bandwidth), core / (gpu.peak_bf16_tflops * 1e12 * hw.cluster.efficiency.attention), ridge)
    if instance.attention_dp:  # attention-DP ranks hold unequal requests; the slowest sets the step
        attention = attention.scaled(eff.moe_imbalance)
    parts = dense + attention
    if block.layer.is_moe:
        expert_bytes, expert_seconds = _expert_parts(hw, block, instance, batch, precision)
        skew = eff.moe_imbalance if instance.ep > 1 else 1.0
        moe_fraction = None if triton_mxfp4_moe(hw, precision) else hw.rates.moe_stream_fraction
        expert_rate = expert_stream_rate(bandwidth, gpu.hbm_bandwidth_gbps * 1e9, moe_fraction)
        parts = parts + StepParts.kernel(stream_seconds(expert_bytes, EXPERT_GEMMS, expert_rate), skew * expert_seconds, ridge)
        routed = routed_row_bytes(block, instance, batch)
        parts = parts + StepParts.kernel(stream_seconds(routed, 2, bandwidth), 0.0)
    overhead = layer_kernels(hw, block, instance, precision, seqs) * kernel_floor_us(hw.cluster) * 1e-6
    overhead += mla_decode_floor(hw, block)
    return parts + StepParts(comm=_block_comm(hw, block, instance, batch, precision), overhead=overhead)


def mla_decode_floor(hw: Hardware, block: BlockShape) -> float:
    """Seconds an MLA layer's decode attention call costs beyond the generic kernel floor where the GPU's engines run a
    measured MLA kernel (``LowPrecisionRates.mla_decode_floor_us``: AMD's aiter ``mla_decode_fwd``, a split-KV ASM
    kernel and its reduce, behind SGLang's ``aiter`` attention backend,
    python/sglang/srt/layers/attention/aiter_backend.py; vLLM's ROCm MLA backends, the same kernel or a split-KV
    pair of Triton kernels, are taken to cost the same [assumption]): its measured time at one short sequence, less
    the floor :func:`layer_kernels` already counts for it (the attention is one of
    ``EngineDefaults.kernels_per_layer``); 0 elsewhere."""
    floor = hw.rates.mla_decode_floor_us
    if floor is None or not block.layer.is_mla:
        return 0.0
    return max(floor - kernel_floor_us(hw.cluster), 0.0) * 1e-6


def head_time(hw: Hardware, shape: ModelShape, instance: Instance, tokens: float) -> float:
    """Seconds of the output head (bf16, vocabulary split over tp) for ``tokens`` tokens."""
    flops = 2.0 * tokens * shape.hidden_size * shape.vocab_size / instance.tp
    stream = shape.head_params / instance.tp * EMBEDDING_BYTES / hbm_rate(hw, hw.efficiency.decode_memory)
    return max(gemm_time(hw.cluster, flops) / hw.efficiency.prefill_compute, stream)


def decode_step_parts(hw: Hardware, shape: ModelShape, instance: Instance, batch: float, context: float,
                      precision: WeightPrecision, kv_element_bytes: float) -> StepParts:
    """The time between two tokens of a sequence in a decode batch of ``batch`` sequences, by part:
    each of the pp stages runs its 1/pp of the blocks on a micro-batch of batch/pp and hands it on,
    so a token waits for all pp micro-batches (TPOT = pp x stage time)."""
    micro = max(batch / instance.pp, 1.0)
    stage = StepParts()
    for block in shape.blocks:
        stage = stage + decode_block_parts(hw, block, instance, micro, context, precision, kv_element_bytes).scaled(block.count)
    head = head_time(hw, shape, instance, micro) / instance.pp
    stage = stage.scaled(1.0 / instance.pp) + StepParts(compute=head, busy=head)
    if instance.pp > 1:
        stage = stage + StepParts(comm=pp_hand_off(hw.cluster, micro, shape.hidden_size))
    return stage.scaled(instance.pp)


def decode_step_time(hw: Hardware, shape: ModelShape, instance: Instance, batch: float, context: float,
                     precision: WeightPrecision, kv_element_bytes: float) -> float:
    """Seconds of one decode step (:func:`decode_step_parts`; one CUDA graph per step)."""
    return decode_step_parts(hw, shape, instance, batch, context, precision, kv_element_bytes).total


def prefill_time(hw: Hardware, shape: ModelShape, instance: Instance, tokens: float, prompt: float,
                 precision: WeightPrecision) -> float:
    """Seconds for one instance to prefill ``tokens`` prompt tokens of prompts ``prompt`` tokens long
    (all pp stages in turn: the latency of one chunk). Causal attention: queries see prompt/2 keys on
    average (``costmodel.flops`` convention). An MoE block waits for its busiest expert-parallel rank
    (``ServingEfficiency.moe_imbalance``) only where experts are split over ranks (ep > 1): with
    ep = 1 every GPU holds a 1/tp slice of every expert and computes the same share of every
    token's experts, so no rank waits for another. A block's GEMMs take at least the time to stream
    the weights the chunk touches (:func:`prefill_weight_bytes`; roofline, Williams et al. CACM
    2009): a short chunk through a large MoE reads every expert for a few rows each."""
    eff, speed = hw.efficiency, gemm_speedup(hw, precision)
    total = 0.0
    per_gpu = tokens / instance.tp
    bandwidth = hbm_rate(hw, eff.decode_memory)
    for block in shape.blocks:
        gemm, core = block_forward_flops(block, per_gpu, prompt / 2.0)
        if hw.fp4_experts_only and precision == "fp4":  # bf16 dense part, experts at their own rate
            dense = dense_gemm_flops(block, per_gpu)
            gemms = (gemm_time(hw.cluster, dense) + gemm_time(hw.cluster, gemm - dense, expert_gemm_speedup(hw, precision))) / eff.prefill_compute
        else:
            gemms = gemm_time(hw.cluster, gemm, speed) / eff.prefill_compute
            if block.layer.is_moe and hw.rates.moe_prefill_tflops:  # the engine's fused MoE at its measured rate
                dense = dense_gemm_flops(block, per_gpu)
                dense_s = gemm_time(hw.cluster, dense, speed) / eff.prefill_compute
                gemms = max(gemms, fused_moe_prefill_seconds(dense_s, gemm - dense, hw.rates.moe_prefill_tflops))
        rest = attention_time(hw.cluster, core, block.layer.head_dim, context=prompt / 2.0)
        rest += routed_row_bytes(block, instance, tokens) / bandwidth
        slowest = eff.moe_imbalance if block.layer.is_moe and instance.ep > 1 else 1.0
        gemms = max(slowest * gemms, prefill_weight_bytes(hw, block, instance, tokens, precision) / bandwidth)
        total += block.count * (gemms + slowest * (rest + _block_comm(hw, block, instance, tokens, precision)))
    total += head_time(hw, shape, instance, tokens / max(prompt, 1.0))
    if instance.pp > 1:
        total += (instance.pp - 1) * pp_hand_off(hw.cluster, tokens, shape.hidden_size)
    return total


def prefill_weight_bytes(hw: Hardware, block: BlockShape, instance: Instance, tokens: float,
                         precision: WeightPrecision) -> float:
    """Weight bytes one block's GEMMs read on the busiest GPU for a prefill chunk of ``tokens``
    tokens: the non-expert weights and the routed experts some token of the chunk picked
    (:func:`costmodel.serving.moe.busiest_rank_experts`), each read once for the whole chunk."""
    mx = mx_storage(hw, precision)
    weights = non_expert_bytes(block, instance, precision, mx, hw.fp4_experts_only, hw.fp4_moe_only)
    if block.layer.is_moe:
        each = expert_shard_params(hw, block, instance, precision)
        weights += busiest_rank_experts(block, instance, tokens) * each * weight_bytes(precision, mx)
    return weights
