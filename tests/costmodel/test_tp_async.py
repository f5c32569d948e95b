"""Golden tests of the TP collectives a Megatron block exposes (costmodel.layer_transformer.tp_comm)
against Megatron-Core's own ``LinearWithGradAccumulationAndAsyncCommunication``."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from costmodel.engines import engine_terms
from costmodel.layer_transformer import _column_gemm_times, tp_all_reduce, tp_comm
from costmodel.local import LocalConfig
from costmodel.specs import ParallelConfig, TransformerLayer
from profiles import load_cluster

A100 = load_cluster("dgx-a100")
GPT_22B = TransformerLayer(hidden_size=6144, num_heads=64, num_kv_heads=64, head_dim=96, ffn_hidden_size=4 * 6144)


def _local(engine: str, sp: bool, recompute: str = "selective", micro_batch: int = 4, **extra: object) -> LocalConfig:
    cfg = ParallelConfig(tp=8, sp=sp, global_batch=4, seq_len=2048, engine=engine, **extra)  # type: ignore[arg-type]
    return LocalConfig(micro_batch=micro_batch, seq_len=2048, tp=8, cp=1, ep=1, sp=sp, recompute=recompute,  # type: ignore[arg-type]
                       flash=False, zero3_group=1, terms=engine_terms(cfg))


def _megatron_backward_source() -> str:
    spec = importlib.util.find_spec("megatron.core")
    assert spec is not None and spec.submodule_search_locations
    text = (Path(spec.submodule_search_locations[0]) / "tensor_parallel" / "layers.py").read_text(encoding="utf-8")
    start = text.index("class LinearWithGradAccumulationAndAsyncCommunication")
    return text[text.index("def backward", start):text.index("\ndef ", start)]


def test_megatron_launches_the_column_linear_collectives_asynchronously() -> None:
    """The source the term models: the SP re-gather, the input-gradient all-reduce (no SP) and
    reduce-scatter (SP) are all ``async_op=True``, issued before the wgrad GEMM."""
    src = _megatron_backward_source()
    async_calls = re.findall(r"(dist_all_gather_func|all_reduce|dist_reduce_scatter_func)\([^)]*async_op=True", src, re.S)
    assert sorted(set(async_calls)) == ["all_reduce", "dist_all_gather_func", "dist_reduce_scatter_func"]
    assert src.index("async_op=True", src.index("all_reduce(grad_input")) < src.index("wgrad_gemm_accum_fp32")


@pytest.mark.parametrize("sp", [False, True])
def test_exposed_and_hidden_all_reduce_equivalents(sp: bool) -> None:
    """22B block at mb 4 (Korthikanti et al. 2022's 22B): forward 2a exposed; backward 2a hidden
    behind QKV's and FC1's GEMMs (SP: plus the a of the re-gather; 1a of row-parallel gathers
    exposed). Without the async path (DeepSpeed's Megatron fork disables it) all 4a are exposed."""
    cfg = _local("megatron", sp)
    a = tp_all_reduce(A100, cfg, 6144)
    qkv, fc1 = _column_gemm_times(GPT_22B, cfg, A100)
    assert min(qkv, fc1) > a  # big enough to hide each linear's share
    link, exposed = tp_comm(GPT_22B, cfg, A100, gemm_s=0.0)
    assert (link, exposed) == pytest.approx(((5 if sp else 4) * a, (3 if sp else 2) * a))
    sync = _local("deepspeed", sp)
    assert tp_comm(GPT_22B, sync, A100, 0.0) == pytest.approx((4 * a, 4 * a))
    assert tp_comm(GPT_22B, _local("megatron", sp, tp_async_backward=False), A100, 0.0) == pytest.approx((4 * a, 4 * a))


def test_full_recompute_repeats_the_forward_collectives_and_small_gemms_expose_the_rest() -> None:
    full = _local("megatron", False, "full")
    a = tp_all_reduce(A100, full, 6144)
    assert tp_comm(GPT_22B, full, A100, 0.0) == pytest.approx((6 * a, 4 * a))
    tiny = _local("megatron", False, micro_batch=1)  # 4x smaller GEMMs, same a per token share
    a1 = tp_all_reduce(A100, tiny, 6144)
    qkv, fc1 = _column_gemm_times(GPT_22B, tiny, A100)
    assert tp_comm(GPT_22B, tiny, A100, 0.0)[1] == pytest.approx(2 * a1 + max(0.0, a1 - qkv) + max(0.0, a1 - fc1))
