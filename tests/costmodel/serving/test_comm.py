"""Attention-DP MoE exchange: TensorRT-LLM's all-gather and reduce-scatter against the training model's
NCCL collectives, the bytes it gathers per element, and where its MNNVL all-to-all takes over."""

from __future__ import annotations

import pytest

from costmodel.comm import all_gather, place_group, reduce_scatter
from costmodel.serving.comm import (
    ROUTING_BYTES_PER_CHOICE,
    dispatch_element_bytes,
    dp_gather_scatter,
    ep_all_to_all,
    gathers_for_dp,
)
from costmodel.serving.engines import DEFAULTS
from costmodel.serving.shape import model_shape
from costmodel.serving.specs import Instance
from costmodel.serving.step import decode_block_parts
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.serving.request import context

B200 = resolve_cluster_arg("dgx-b200")
NVL72 = resolve_cluster_arg("gb200-nvl72")


def test_gathered_bytes_follow_the_moe_input_quantisation() -> None:
    """fused_moe_cutlass.py forward_chunk: NVFP4 0.5 B + a scale per 16, MXFP8 1 B + one per 32, per-tensor
    FP8 1 B, DeepSeek's block-scaled FP8 and bf16 activations 2 B."""
    assert dispatch_element_bytes("fp4", False, True, False) == pytest.approx(0.5 + 1 / 16)
    assert dispatch_element_bytes("fp4", True, True, False) == pytest.approx(1 + 1 / 32)
    assert dispatch_element_bytes("fp4", True, False, False) == 2.0
    assert dispatch_element_bytes("fp8", False, False, False) == 1.0
    assert dispatch_element_bytes("fp8", False, False, True) == 2.0
    assert dispatch_element_bytes("bf16", False, False, False) == 2.0


def test_gather_scatter_is_an_nccl_all_gather_then_a_reduce_scatter() -> None:
    group = place_group(4, 1, B200.gpus_per_node)
    tokens, hidden, k = 1024, 2880, 4
    gathered = tokens * (hidden * 1.0 + k * ROUTING_BYTES_PER_CHOICE)
    expected = all_gather(B200, group, gathered) + reduce_scatter(B200, group, tokens * hidden * 2.0)
    assert dp_gather_scatter(B200, 4, tokens, hidden, k, 1.0) == pytest.approx(expected)
    assert dp_gather_scatter(B200, 1, tokens, hidden, k, 1.0) == 0.0
    assert dp_gather_scatter(B200, 4, 4 * tokens, hidden, k, 1.0) > dp_gather_scatter(B200, 4, tokens, hidden, k, 1.0)


def test_mnnvl_all_to_all_only_beyond_top_k_on_a_multi_node_nvlink_domain() -> None:
    """CutlassFusedMoE.enable_alltoall: moe_ep_size > top_k and supports_mnnvl (GB200 NVL72, not a DGX node)."""
    assert gathers_for_dp(True, B200, 8, 4)
    assert not gathers_for_dp(True, NVL72, 8, 4)
    assert gathers_for_dp(True, NVL72, 8, 8)
    assert not gathers_for_dp(False, B200, 8, 4)
    assert DEFAULTS["trtllm"].dp_moe_allgather and not DEFAULTS["vllm"].dp_moe_allgather


def test_tensorrt_llm_attention_dp_moe_block_prices_the_gather() -> None:
    """gpt-oss-120b on 4 B200 under attention DP: TensorRT-LLM's block exchange is the gather and scatter of
    all 256 tokens at MXFP8, not the all-to-all SGLang's path keeps."""
    shape = model_shape(resolve_model_arg("gpt-oss-120b"))
    block, inst = shape.blocks[0], Instance(tp=4, ep=1, attention_dp=True)
    trt = context(model="gpt-oss-120b", cluster="dgx-b200", gpus=4, isl=1024, osl=1024, precision="fp4",
                  kv_dtype=None, engine="trtllm").hardware
    sgl = context(model="gpt-oss-120b", cluster="dgx-b200", gpus=4, isl=1024, osl=1024, precision="fp4",
                  kv_dtype=None, engine="sglang").hardware
    k, h = block.layer.moe_top_k, block.layer.hidden_size
    trt_comm = decode_block_parts(trt, block, inst, 256, 1536, "fp4", 1.0).comm
    sgl_comm = decode_block_parts(sgl, block, inst, 256, 1536, "fp4", 1.0).comm
    assert trt_comm == pytest.approx(dp_gather_scatter(B200, 4, 256, h, k, 1 + 1 / 32))
    assert sgl_comm == pytest.approx(ep_all_to_all(B200, 4, 64, h, k))
