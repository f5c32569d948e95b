"""A MoE block's time under the native runtime's op-level selective recomputation
(``costmodel.layer_transformer``): the matmuls it recomputes are those whose outputs the memory does
not count as saved (``costmodel.activations.moe_sac_matmuls``), and the expert-parallel all-to-alls
run again."""

from __future__ import annotations

import pytest

from costmodel.activations import moe_sac_matmuls
from costmodel.engines import engine_terms, sac_saved_matmuls
from costmodel.kernels import matmul_time
from costmodel.layer_transformer import _ep_comm, _native_moe_recomputed_s, transformer_cost
from costmodel.local import LocalConfig
from costmodel.specs import ParallelConfig, TransformerLayer
from profiles.loader import load_cluster

MOE = TransformerLayer(hidden_size=1024, num_heads=8, num_kv_heads=8, head_dim=128, ffn_hidden_size=2048, ffn_act="swiglu",
                       norm="rmsnorm", num_experts=8, moe_top_k=2)
TOKENS = 1024


def _local(engine: str, recompute: str, ep: int = 1) -> LocalConfig:
    terms = engine_terms(ParallelConfig(dp=8, ep=ep, micro_batch=1, global_batch=8, seq_len=TOKENS, engine=engine, recompute=recompute))
    return LocalConfig(micro_batch=1, seq_len=TOKENS, tp=1, cp=1, ep=ep, sp=False, recompute=recompute, flash=True, zero3_group=1, terms=terms)


def test_grouped_experts_are_recomputed_whole() -> None:
    """Without EP the experts run ``grouped_mm`` (not an ``mm``): selective re-runs all of them,
    beyond what torchtitan's engine (its MoE blocks priced apart) recomputes."""
    cluster = load_cluster("dgx-h100")
    native = transformer_cost(MOE, _local("native", "selective"), cluster)
    titan = transformer_cost(MOE, _local("torchtitan", "selective"), cluster)
    routed, h, f = TOKENS * 2 / 8, MOE.hidden_size, MOE.ffn_hidden_size
    experts = matmul_time(cluster, routed, 2 * f, h, 8) + matmul_time(cluster, routed, h, f, 8)
    assert native.recompute_s - titan.recompute_s == pytest.approx(experts, rel=0.2)


@pytest.mark.parametrize("attn", [4, 5])
def test_recomputed_expert_matmuls_are_the_unsaved_ones(attn: int) -> None:
    """Under EP each local expert's gate-up and down are ``mm`` calls and the odd-numbered matmuls of
    the block are saved: after 4 attention projections the router and every down are saved (the
    gate-ups recomputed), after 5 the router and every down are recomputed."""
    cfg = _local("native", "selective", ep=2)
    widths = [1.0] * attn
    up, down, router = 4.0, 2.0, 0.5
    got = _native_moe_recomputed_s(MOE, cfg, widths, router, (up, down), (0.0, 0.0))
    assert got == pytest.approx(up if attn == 4 else router + down)
    saved = sac_saved_matmuls(moe_sac_matmuls(MOE, cfg, widths)[0])[attn:]
    assert saved == [attn == 4] + [attn != 4, attn == 4] * 4


def test_shared_expert_matmuls_follow_the_routed_ones() -> None:
    """A shared expert's gate, up and down come after the routed experts, split by TP."""
    layer = MOE.model_copy(update={"shared_expert_ffn_hidden_size": 512})
    widths, _ = moe_sac_matmuls(layer, _local("native", "selective"), [1.0] * 4)
    assert widths == [1.0] * 4 + [8.0, 512.0, 512.0, 1024.0]


def test_native_selective_reruns_the_dispatch() -> None:
    """The native runtime's checkpoint re-runs the dispatch and combine all-to-alls as full
    recomputation does (6 a step); torchtitan's selective runs four."""
    cluster = load_cluster("dgx-h100")
    runs = {(e, r): _ep_comm(MOE, _local(e, r, ep=2), cluster) for e in ("native", "torchtitan") for r in ("selective", "full")}
    assert runs["native", "selective"] == pytest.approx(runs["native", "full"])
    assert runs["torchtitan", "selective"] == pytest.approx(runs["native", "full"] * 4 / 6)
