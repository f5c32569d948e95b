"""Megatron's own configuration code reads every Megatron-LM export (the ``test`` extra installs
megatron-core 0.16.1, the newest on PyPI for Python 3.11).

megatron-core on PyPI ships ``megatron.core`` only: the argument parser of ``megatron/training/
arguments.py`` (``parse_args`` / ``validate_args``) is not installable from a registry, so the argv
is turned into the fields those functions fill in (``core_transformer_config_from_args``: flag
names are the dataclass fields, ``--num-experts`` -> ``num_moe_experts``, ``--swiglu`` -> gated
SiLU, ``--disable-bias-linear``, ``--bf16``) and checked by megatron-core itself:
``TransformerConfig.__post_init__`` (heads and groups against TP, MoE with SP, recomputation,
virtual stages), ``PipelineParallelLayerLayout`` (the ``--pipeline-model-parallel-layout``
string), ``ConstantNumMicroBatchesCalculator`` and ``RankGenerator`` (world size). Every flag the
export emits must be one of those fields or a known training flag, so a new flag fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from costmodel.specs import TransformerLayer
from planner.export import export
from planner.plans import plan_model
from planner.validate import plan_problems

CONFIG_FIELDS = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
    "sequence_parallel", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules", "normalization",
    "add_qkv_bias", "bf16", "tp_comm_overlap", "pipeline_model_parallel_layout", "fp8_recipe", "cpu_offloading",
    "cpu_offloading_num_layers", "qk_layernorm",
}
"""Flags whose dest is a ``TransformerConfig`` / ``ModelParallelConfig`` field of the same name."""
MLA_FIELDS = {"multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"}
"""``MLATransformerConfig`` fields (``--multi-latent-attention`` makes Megatron-LM build that config)."""
RENAMED = {"fp8_format": "fp8", "num_experts": "num_moe_experts", "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size"}
TRAINING_FLAGS = {
    "micro_batch_size", "global_batch_size", "seq_length", "max_position_embeddings", "position_embedding_type",
    "untie_embeddings_and_output_weights", "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather",
    "grad_reduce_in_bf16", "use_megatron_fsdp", "data_parallel_sharding_strategy", "ckpt_format", "group_query_attention",
    "swiglu", "disable_bias_linear", "optimizer_cpu_offload",
}
"""Flags ``pretrain_gpt.py`` reads outside the transformer config (or that set several fields)."""
LIST_FLAGS = {"recompute_modules"}


def parse_argv(argv: list[str]) -> dict[str, Any]:
    """``--flag value`` / ``--flag`` tokens as argparse dests (``--a-b`` -> ``a_b``); values stay strings."""
    out: dict[str, Any] = {}
    key = None
    for token in argv:
        if token.startswith("--"):
            key = token[2:].replace("-", "_")
            assert key not in out, f"{token} given twice"
            out[key] = True
        else:
            assert key is not None, token
            out[key] = [token] if key in LIST_FLAGS and out[key] is True else out[key] + [token] if key in LIST_FLAGS else token
    return out


def transformer_config(args: dict[str, Any]) -> Any:
    """``TransformerConfig`` from the parsed flags, as Megatron-LM's ``core_transformer_config_from_args``."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    unknown = set(args) - CONFIG_FIELDS - MLA_FIELDS - set(RENAMED) - TRAINING_FLAGS
    assert not unknown, f"flags this test does not know Megatron's handling of: {sorted(unknown)}"
    kwargs: dict[str, Any] = {}
    for key, value in args.items():
        if key in CONFIG_FIELDS or key in RENAMED or key in MLA_FIELDS:
            kwargs[RENAMED.get(key, key)] = _value(key, value)
    if args.get("swiglu"):
        kwargs.update(gated_linear_unit=True, activation_func=F.silu, bias_activation_fusion=False)
    kwargs["add_bias_linear"] = not args.get("disable_bias_linear", False)
    kwargs["params_dtype"] = kwargs["pipeline_dtype"] = torch.bfloat16 if args.get("bf16") else torch.float32  # as Megatron-LM sets both
    return (MLATransformerConfig if args.get("multi_latent_attention") else TransformerConfig)(**kwargs)


def _value(key: str, value: Any) -> Any:
    if value is True or isinstance(value, list):
        return value
    if key == "moe_layer_freq":
        return eval(value, {"__builtins__": {}})  # Megatron-LM evaluates this flag as a Python list expression
    if key in ("normalization", "recompute_granularity", "recompute_method", "pipeline_model_parallel_layout", "fp8_format", "fp8_recipe"):
        return value
    return int(value)


@pytest.fixture(scope="module")
def parsed(engine_plans) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """(plan, parsed flags, TransformerConfig) per Megatron-LM case."""
    out = {}
    for cid, plan in engine_plans("megatron"):
        assert plan_problems(plan) == [], cid
        args = parse_argv(export(plan, "megatron").argv())
        out[cid] = (plan, args, transformer_config(args))
    return out


def test_fp8_and_offload_reach_megatron_config(parsed) -> None:
    """FP8 plans run Transformer Engine's hybrid format with delayed scaling (the cost model's
    recipe on Hopper); offloading plans set the distributed optimizer's CPU offload (an
    ``OptimizerConfig`` field) and activation offloading, which megatron-core accepts."""
    from dataclasses import fields

    from megatron.core.optimizer import OptimizerConfig

    for cid, (plan, args, cfg) in parsed.items():
        fp8 = plan.config.precision == "fp8"
        assert (cfg.fp8, cfg.fp8_recipe if fp8 else None) == (("hybrid", "delayed") if fp8 else (None, None)), cid
        assert cfg.cpu_offloading == plan.config.offload_activations, cid
        assert args.get("optimizer_cpu_offload", False) == plan.config.offload_optimizer, cid
    assert "optimizer_cpu_offload" in {f.name for f in fields(OptimizerConfig)}
    assert any(p.config.precision == "fp8" and p.config.offload_optimizer for p, _, _ in parsed.values())


def test_every_model_and_shape_is_covered(parsed) -> None:
    assert {"llama8b-megatron-interleaved", "llama8b-megatron-uneven-cp", "llama70b-megatron-interleaved", "llama405b-megatron-uneven",
            "gpt175b-megatron-interleaved", "mixtral-megatron", "deepseekv3-megatron"} <= set(parsed)


def test_transformer_config_has_the_planned_model_and_degrees(parsed) -> None:
    for cid, (plan, _, cfg) in parsed.items():
        model, m = plan_model(plan), plan.mesh
        blocks = [x for x in model.layers if isinstance(x, TransformerLayer)]
        assert (cfg.num_layers, cfg.hidden_size, cfg.num_attention_heads) == (len(blocks), blocks[0].hidden_size, blocks[0].num_heads), cid
        assert (cfg.num_query_groups or cfg.num_attention_heads) == blocks[0].num_kv_heads, cid
        assert (cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size, cfg.context_parallel_size, cfg.expert_model_parallel_size) == (m.tp, m.pp, m.cp, m.ep), cid
        assert cfg.sequence_parallel == (m.sp and m.tp > 1), cid
        assert (cfg.num_moe_experts or 0) == max(b.num_experts for b in blocks), cid
        b = blocks[0]
        mla = (b.q_lora_rank, b.kv_lora_rank, b.qk_nope_head_dim, b.qk_rope_head_dim, b.v_head_dim) if b.is_mla else None
        assert mla == ((cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_head_dim, cfg.qk_pos_emb_head_dim, cfg.v_head_dim)
                       if getattr(cfg, "multi_latent_attention", False) else None), cid


def test_layers_per_chunk_are_the_planned_split(parsed) -> None:
    from megatron.core.transformer.enums import LayerType

    for cid, (plan, _, cfg) in parsed.items():
        model, pp = plan_model(plan), plan.mesh.pp
        planned = [sum(isinstance(model.layers[i], TransformerLayer) for i in st.layers) for st in plan.stages]
        layout = cfg.pipeline_model_parallel_layout
        if layout is None:  # Megatron-LM's even split: num_layers / (pp x vpp) per chunk
            chunks = pp * (cfg.virtual_pipeline_model_parallel_size or 1)
            assert cfg.num_layers % chunks == 0 and planned == [cfg.num_layers // chunks] * chunks, cid
            continue
        vpp = layout.virtual_pipeline_model_parallel_size
        assert vpp == plan.schedule.virtual_stages, cid
        layout.validate_layer_layout(num_layers=cfg.num_layers, mtp_num_layers=0)
        megatron = [layout.layout[k % pp][k // pp].count(LayerType.decoder) for k in range(pp * vpp)]
        assert megatron == planned, f"{cid}: Megatron builds {megatron} blocks per chunk, the plan {planned}"
        assert LayerType.embedding in layout.layout[0][0] and LayerType.loss in layout.layout[pp - 1][vpp - 1], cid


def test_micro_batches_and_world_size_as_megatron_derives_them(parsed) -> None:
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.parallel_state import RankGenerator

    for cid, (plan, args, cfg) in parsed.items():
        gpus = plan.request.gpus
        dp = gpus // (cfg.tensor_model_parallel_size * cfg.pipeline_model_parallel_size * cfg.context_parallel_size)  # Megatron-LM's rule
        assert dp == plan.mesh.dp, cid
        calc = ConstantNumMicroBatchesCalculator(int(args["global_batch_size"]), int(args["micro_batch_size"]), dp, False, 0)
        assert calc.get() == plan.schedule.num_microbatches, cid
        ranks = RankGenerator(tp=cfg.tensor_model_parallel_size, ep=1, dp=dp, pp=cfg.pipeline_model_parallel_size, cp=cfg.context_parallel_size, order="tp-cp-ep-dp-pp")
        assert ranks.world_size == gpus, cid
        assert int(args["seq_length"]) == plan.config.seq_len and int(args["max_position_embeddings"]) >= int(args["seq_length"]), cid
