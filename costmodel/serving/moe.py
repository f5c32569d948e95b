"""Mixture-of-experts decode: which expert weights a step streams and how full their GEMM tiles are.

In decode a step's b tokens each pick top-k of E routed experts, so a layer reads the weights of the
distinct experts touched, at most min(E, b·k): with uniform routing E·(1 − (1 − k/E)^b) of them
(the expected number of occupied bins when b·k balls fall into E bins, k distinct per token;
Feller, "An Introduction to Probability Theory" vol. 1 §II.5 occupancy). Expert parallelism splits
the E experts over ep ranks and the step waits for the busiest rank, whose count exceeds the mean
by the expected maximum of ep standard normal deviates (roughly Gaussian counts): Blom's formula
Φ⁻¹((ep − 0.375)/(ep + 0.25)) (Blom, "Statistical Estimates and Transformed Beta-Variables",
1958; 0.59, 1.05, 1.43 for 2, 4, 8 ranks against the exact 0.56, 1.03, 1.42 of Harter's tables,
Biometrika 1961), where the asymptotic sqrt(2 ln ep) (Cramér §28.6) overstates it by 40-100 % at
these sizes.
A grouped GEMM pads each touched expert's rows to its tile height, so a handful of tokens per expert
costs a whole tile of tensor-core work (CUTLASS grouped GEMM tiles; vLLM ``fused_moe``
``moe_align_block_size`` pads every expert's tokens to BLOCK_SIZE_M).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from costmodel.serving.shape import BlockShape
from costmodel.serving.specs import Instance

GROUPED_GEMM_TILE_ROWS = 16
"""Rows per tile of the decode-time grouped expert GEMM: vLLM's ``fused_moe`` default config for
small batches (``get_default_config``: BLOCK_SIZE_M 16 when tokens <= experts) and TensorRT-LLM's
min-latency CUTLASS MoE tiles; a touched expert costs at least one tile of rows."""


def experts_touched(block: BlockShape, tokens: float) -> float:
    """Expected distinct routed experts ``tokens`` tokens pick, top-k of E each, uniform routing:
    E·(1 − (1 − k/E)^tokens) <= min(E, tokens·k)."""
    e, k = block.layer.num_experts, block.layer.moe_top_k
    if not e or tokens <= 0:
        return 0.0
    return min(float(e), tokens * k, e * (1.0 - (1.0 - k / e) ** tokens))


def busiest_rank_experts(block: BlockShape, instance: Instance, tokens: float) -> float:
    """Distinct experts the busiest of the ep ranks streams for a step of ``tokens`` tokens: each
    rank holds E/ep experts, each touched with probability p = touched / E; the busiest rank's count
    is the mean plus the expected maximum of ep standard normals in standard deviations
    (:func:`expected_max_normal`), at most E/ep (module docstring)."""
    e = block.layer.num_experts
    touched = experts_touched(block, tokens)
    if instance.ep <= 1 or not e:
        return touched
    local = e / instance.ep
    p = touched / e
    spread = math.sqrt(max(local * p * (1.0 - p), 0.0)) * expected_max_normal(instance.ep)
    return min(local, local * p + spread)


def expected_max_normal(n: int) -> float:
    """Expected largest of ``n`` independent standard normal deviates, by Blom's approximation
    Φ⁻¹((n − 0.375)/(n + 0.25)) (module docstring); 0 for one rank."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


TRTLLM_TILE_ROWS = (8, 64)
"""Smallest and largest token tile of TensorRT-LLM's fused MoE kernels (trtllm-gen, also behind
FlashInfer's TensorRT-LLM MoE in vLLM and SGLang): ``calculate_tile_tokens_dim`` pads the tokens
per expert to the next power of two within [8, 64] (TensorRT-LLM ``fused_moe``; FlashInfer tests
``test_trtllm_gen_fused_moe.py``; vLLM ``flashinfer_utils.py``)."""


def padded_expert_rows(block: BlockShape, instance: Instance, tokens: float, touched: float,
                       trtllm_tiles: bool = False) -> float:
    """Token rows the busiest rank's grouped GEMM computes: its share of the ``tokens``·k routed
    tokens, each of its ``touched`` experts padded up to :data:`GROUPED_GEMM_TILE_ROWS`, or, for
    TensorRT-LLM's fused MoE (``trtllm_tiles``), to a tile of the next power of two of its tokens
    within :data:`TRTLLM_TILE_ROWS`."""
    if touched <= 0:
        return 0.0
    routed = tokens * block.layer.moe_top_k / instance.ep
    per_expert = max(routed / touched, 1e-9)
    tile = GROUPED_GEMM_TILE_ROWS
    if trtllm_tiles:
        low, high = TRTLLM_TILE_ROWS
        tile = min(max(2 ** math.ceil(math.log2(per_expert)), low), high) if per_expert > 1 else low
    return touched * math.ceil(per_expert / tile) * tile


ROUTED_ROW_BYTES = 2.0 + 2.0 + 1.0
"""HBM bytes per element of one routed token row (a token's hidden state sent to one of its top-k
experts) beyond the expert GEMMs' weights: the down GEMM writes each of the k expert outputs
(bf16, 2 B) and the combine kernel reads them back to sum them under the router weights (2 B), and
the dispatch writes the permuted GEMM input row (1 B, FP8 / FP4 activations or the row gathered
once into shared memory; 2 B for bf16 would only add). vLLM ``fused_moe`` writes
``intermediate_cache3`` [tokens, k, hidden] and reduces it in ``moe_sum``; SGLang's
``fused_moe`` the same; TensorRT-LLM's CUTLASS MoE expands the input rows
(``expandInputRowsKernel``) and its ``finalizeMoeRoutingKernel`` reads the k permuted output rows
of each token (``cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm``)."""


def routed_row_bytes(block: BlockShape, instance: Instance, tokens: float) -> float:
    """HBM bytes one GPU moves to route ``tokens`` tokens through the routed experts and back
    (:data:`ROUTED_ROW_BYTES` per hidden element of each routed row). Each GPU handles the rows of
    its own experts, tokens·k / ep of them, at the full hidden width however the experts' weights
    are split over the tp / ep GPUs: tensor-parallel experts cut the FLOPs per GPU, not the rows."""
    if not block.layer.is_moe or tokens <= 0:
        return 0.0
    rows = tokens * block.layer.moe_top_k / instance.ep
    return rows * block.layer.hidden_size * ROUTED_ROW_BYTES


def _round_up(value: float, multiple: int) -> float:
    return math.ceil(value / multiple) * multiple


def mxfp4_padding_factor(block: BlockShape, shards: int, padding: tuple[int, int, int, bool]) -> float:
    """Expert weight elements one GPU holds after the engine's MXFP4 padding, over the unpadded ones,
    for experts split ``shards`` ways by tensor parallelism (``EngineDefaults.mxfp4_padding``:
    intermediate multiple, hidden multiple as the gate-up GEMM's reduction dimension, hidden multiple
    as the down GEMM's output, pad before the split). Gated experts hold two input projections of
    hidden x intermediate and one output projection; biases are left out (a few per mille)."""
    layer = block.layer
    if not layer.is_moe or shards <= 0:
        return 1.0
    inter_multiple, k_multiple, n_multiple, before_split = padding
    h, f = layer.hidden_size, layer.ffn_hidden_size
    if before_split:
        shard = _round_up(f, inter_multiple * shards) / shards
    else:
        shard = _round_up(f / shards, inter_multiple)
    inputs = 2 if layer.ffn_act == "swiglu" else 1
    padded = inputs * shard * _round_up(h, k_multiple) + shard * _round_up(h, n_multiple)
    return padded / ((inputs + 1) * h * f / shards)


def fused_moe_prefill_seconds(dense_seconds: float, routed_flops: float, tflops: float | None) -> float:
    """Seconds of a prefill block's GEMMs where the engine's fused MoE computes the routed experts
    at a measured rate (``LowPrecisionRates.moe_prefill_tflops``: AMD aiter's tuned block-scaled
    FP8 MoE table): the dense GEMMs' modelled time plus the routed FLOPs at that rate; 0 where no
    rate is measured (the GEMMs keep the modelled rate)."""
    if tflops is None or routed_flops <= 0:
        return 0.0
    return dense_seconds + routed_flops / (tflops * 1e12)
