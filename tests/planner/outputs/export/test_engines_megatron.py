"""Megatron-LM's own argument code reads every Megatron-LM export.

Each export's argv goes through Megatron-LM's ``parse_args`` (``sys.argv`` patched to
``pretrain_gpt.py`` + argv) and ``validate_args`` (``WORLD_SIZE`` = the plan's GPUs, the export's
environment set), then ``core_transformer_config_from_args`` builds megatron-core's
``TransformerConfig`` (its ``__post_init__`` checks heads and groups against TP, MoE with SP,
recomputation, virtual stages). ``megatron/training`` ships only in wheels for Python >= 3.12:
pip fetches the megatron-core 0.17.0 wheel at test time and its checked files run against the
pinned megatron-core 0.16.1 with the shims ``megatron_lm/megatron_training.py`` lists
(``megatron_lm/wheel.py``). Without a registry the tests are skipped, saying why. The values Megatron-LM derives (data-
parallel size, virtual pipeline size, micro-batches, layers per chunk, recomputation) must equal
the plan's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from costmodel.specs import TransformerLayer
from planner.outputs.export import export
from planner.plans.named_model import plan_model
from planner.plans.plan_checks import plan_problems


def _helper(name: str) -> Any:
    """``megatron_lm/<name>.py``, loaded from its file (no test folder goes on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"meshplan_megatron_{name}", Path(__file__).with_name("megatron_lm") / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_shim, _wheel = _helper("megatron_training"), _helper("wheel")


@pytest.fixture(scope="session")
def training_root() -> Path:
    """``megatron/training`` fetched from the registry (skips every test here, with the reason, without one)."""
    try:
        return _wheel.training_root()
    except _wheel.FetchError as err:
        pytest.skip(f"Megatron-LM's argument code could not be fetched: {err}")


def megatron_args(argv: list[str], world_size: int, env: dict[str, str], gpu: str) -> tuple[Any, Any]:
    """Megatron-LM's own parse_args / validate_args on ``argv`` (see ``megatron_lm/megatron_training.py``)."""
    return _shim.megatron_args(_wheel.training_root(), argv, world_size, env, gpu)


def run_megatron(plan: Any, argv: list[str] | None = None, env: dict[str, str] | None = None) -> tuple[Any, Any]:
    """Megatron-LM's validated arguments and ``TransformerConfig`` for the plan's export (or ``argv``)."""
    result = export(plan, "megatron")
    return megatron_args(result.argv() if argv is None else argv, plan.request.gpus,
                         result.env if env is None else env, plan.cluster.gpu.name)


@pytest.fixture(scope="module")
def parsed(engine_plans, training_root) -> dict[str, tuple[Any, Any, Any]]:
    """(plan, Megatron-LM args after validate_args, TransformerConfig) per Megatron-LM case."""
    out = {}
    for cid, plan in engine_plans("megatron"):
        assert plan_problems(plan) == [], cid
        out[cid] = (plan, *run_megatron(plan))
    return out


def test_every_model_and_shape_is_covered(parsed) -> None:
    assert {"llama8b-megatron-interleaved", "llama8b-megatron-uneven-cp", "llama70b-megatron-interleaved", "llama405b-megatron-uneven",
            "gpt175b-megatron-interleaved", "mixtral-megatron", "deepseekv3-megatron", "llama8b-megatron-fp8-offload"} <= set(parsed)


def test_megatron_derives_the_planned_degrees_and_batches(parsed) -> None:
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator

    for cid, (plan, args, _) in parsed.items():
        m, s = plan.mesh, plan.schedule
        assert args.world_size == plan.request.gpus, cid
        assert (args.data_parallel_size, args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
                args.context_parallel_size, args.expert_model_parallel_size) == (m.dp, m.tp, m.pp, m.cp, m.ep), cid
        assert (args.virtual_pipeline_model_parallel_size or 1) == s.virtual_stages, cid
        # what Megatron-LM's training loop builds from the validated arguments (it asserts divisibility)
        calc = ConstantNumMicroBatchesCalculator(args.global_batch_size, args.micro_batch_size, args.data_parallel_size, False, 0)
        assert calc.get() == s.num_microbatches, cid
        assert args.seq_length == plan.config.seq_len, cid
        assert args.sequence_parallel == (m.sp and m.tp > 1), cid
        assert args.use_distributed_optimizer == (m.zero >= 1), cid
        assert args.use_megatron_fsdp == (m.zero >= 2), cid


def test_transformer_config_has_the_planned_model(parsed) -> None:
    for cid, (plan, _, cfg) in parsed.items():
        blocks = [x for x in plan_model(plan).layers if isinstance(x, TransformerLayer)]
        b = blocks[0]
        assert (cfg.num_layers, cfg.hidden_size, cfg.num_attention_heads) == (len(blocks), b.hidden_size, b.num_heads), cid
        assert (cfg.num_query_groups or cfg.num_attention_heads) == b.num_kv_heads, cid
        assert b.is_mla or cfg.kv_channels == b.head_dim, cid  # MLA's head widths are its own fields (below)
        assert (cfg.num_moe_experts or 0) == max(x.num_experts for x in blocks), cid
        assert cfg.gated_linear_unit == (b.ffn_act == "swiglu"), cid
        mla = (b.q_lora_rank, b.kv_lora_rank, b.qk_nope_head_dim, b.qk_rope_head_dim, b.v_head_dim) if b.is_mla else None
        assert mla == ((cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_head_dim, cfg.qk_pos_emb_head_dim, cfg.v_head_dim)
                       if getattr(cfg, "multi_latent_attention", False) else None), cid
        modes = {mode for st in plan.stages for i, mode in zip(st.layers, st.layer_recompute) if i in range(1, len(blocks) + 1)}
        assert (cfg.recompute_granularity or "none") == ("none" if modes <= {"none"} else modes.pop() if len(modes) == 1 else "full"), cid


def test_fp8_and_offload_reach_megatron_config(parsed) -> None:
    """FP8 plans run Transformer Engine's hybrid format with delayed scaling (the cost model's
    recipe on Hopper); offloading plans set the distributed optimizer's CPU offload and activation
    offloading, as Megatron-LM's own arguments carry them."""
    for cid, (plan, args, cfg) in parsed.items():
        fp8 = plan.config.precision == "fp8"
        assert (cfg.fp8, cfg.fp8_recipe if fp8 else None) == (("hybrid", "delayed") if fp8 else (None, None)), cid
        assert cfg.cpu_offloading == plan.config.offload_activations, cid
        assert getattr(args, "optimizer_cpu_offload", False) == plan.config.offload_optimizer, cid
    assert any(p.config.precision == "fp8" and p.config.offload_optimizer for p, _, _ in parsed.values())


def test_layers_per_chunk_are_the_planned_split(parsed) -> None:
    from megatron.core.transformer.enums import LayerType

    for cid, (plan, args, cfg) in parsed.items():
        model, pp = plan_model(plan), plan.mesh.pp
        planned = [sum(isinstance(model.layers[i], TransformerLayer) for i in st.layers) for st in plan.stages]
        layout = cfg.pipeline_model_parallel_layout
        vpp = args.virtual_pipeline_model_parallel_size or 1
        if layout is None:  # Megatron-LM's even split: num_layers / (pp x vpp) per chunk
            assert cfg.num_layers % (pp * vpp) == 0 and planned == [cfg.num_layers // (pp * vpp)] * (pp * vpp), cid
            continue
        layout.validate_layer_layout(num_layers=cfg.num_layers, mtp_num_layers=0)
        megatron = [layout.layout[k % pp][k // pp].count(LayerType.decoder) for k in range(pp * vpp)]
        assert megatron == planned, f"{cid}: Megatron builds {megatron} blocks per chunk, the plan {planned}"
        assert LayerType.embedding in layout.layout[0][0] and LayerType.loss in layout.layout[pp - 1][vpp - 1], cid


def test_megatron_refuses_what_does_not_fit_the_world(parsed) -> None:
    """The check can fail: Megatron-LM's own validation refuses a world the degrees do not tile
    and a TP run without the export's ``CUDA_DEVICE_MAX_CONNECTIONS=1``."""
    plan = parsed["llama8b-megatron-interleaved"][0]
    argv = export(plan, "megatron").argv()
    with pytest.raises(AssertionError, match="not divisible by total_model_size"):
        megatron_args(argv, plan.request.gpus + 2, export(plan, "megatron").env, plan.cluster.gpu.name)
    with pytest.raises(AssertionError, match="CUDA_DEVICE_MAX_CONNECTIONS"):
        run_megatron(plan, env={})
