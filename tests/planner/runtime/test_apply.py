"""``planner.apply`` in one process: meta modules on a fake 8-rank world, refusals, roles, recompute."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor
from torch.testing._internal.distributed.fake_pg import FakeStore

import planner
from planner.errors import InputError
from planner.runtime.apply import preflight
from planner.runtime.precision import FP32
from planner.runtime.models import build_model
from planner.runtime.recompute import apply_recompute
from planner.runtime.tensor_parallel import block_roles
from plan_helpers import gpt_spec, make_plan, write_llama_config

HERE = Path(__file__).parent
CUSTOM = f"{HERE / 'custom_model.py'}:build"


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_llama_config(tmp_path_factory.mktemp("llama"))


@pytest.fixture
def fake_world() -> Iterator[callable]:
    def start(rank: int, world: int) -> None:
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def test_meta_module_on_fake_world_is_split_without_materialising(llama: str, fake_world) -> None:
    plan = make_plan(llama, {"pp": 2, "dp": 2, "tp": 2, "zero": 3, "sp": True,
                             "layer_recompute": ["none", "full", "selective", "none", "full", "none", "none"]})
    fake_world(7, 8)  # the last rank: pipeline rank 1, layers 3.. of the plan's second stage
    runtime = planner.apply(plan, build_model(llama), device_type="cpu")
    params = dict(runtime.named_parameters())
    assert all(p.device.type == "meta" for p in params.values())
    assert "lm_head.weight" in params and "model.embed_tokens.weight" not in params
    q = params["model.layers.3.self_attn.q_proj.weight"]
    assert isinstance(q, DTensor) and q.shape == (32, 32) and q.to_local().shape == (8, 32)  # tp 2 x dp 2 shards
    assert runtime.chunks == [1] and runtime.schedule is not None
    assert [u.index for u in runtime.stages[0].units] == plan.stages[1].layers


@pytest.mark.parametrize("sp", [False, True])
def test_preset_embedding_is_split_by_vocabulary_under_tp(sp: bool, fake_world) -> None:
    """Megatron's VocabParallelEmbedding, as the plan and the cost model assume: rows of the token
    table over tp, the position table replicated."""
    from torch.distributed.tensor import Replicate, Shard

    spec = gpt_spec()
    fake_world(1, 2)
    runtime = planner.apply(make_plan(spec, {"tp": 2, "sp": sp}, spec=spec), build_model(spec), device_type="cpu")
    params = dict(runtime.named_parameters())
    tokens, positions = params["embed.token_weight"], params["embed.position_weight"]
    # the last mesh dimension is tp (FSDP2's one-rank shard dimension comes first: bf16 mixed precision)
    assert isinstance(tokens, DTensor) and tokens.placements[-1] == Shard(0) and tokens.to_local().shape == (64, 32)
    assert isinstance(positions, DTensor) and positions.placements[-1] == Replicate()
    assert tokens.device_mesh.mesh_dim_names[-1] == "tp"


def test_last_pipeline_stage_keeps_logits_vocab_sharded_under_tp(fake_world) -> None:
    """TP x PP: the last stage hands its schedule the local vocabulary shard (loss_parallel), never the
    gathered full-vocabulary logits."""
    spec = gpt_spec()
    fake_world(3, 4)  # pipeline rank 1 (blocks, norm, head), tp rank 1
    # fp32: a forward on meta, which FSDP2 (bf16 mixed precision wraps dp 1 too) refuses before materialising
    runtime = planner.apply(make_plan(spec, {"pp": 2, "tp": 2}, spec=spec), build_model(spec), device_type="cpu",
                            precision=FP32)
    logits = runtime.stages[0](torch.empty(2, 16, 32, device="meta"))
    assert runtime.loss_parallel and not isinstance(logits, DTensor) and logits.shape == (2, 16, 64)


@pytest.mark.parametrize("model", ["gpt", "custom", "llama"])
def test_block_roles_follow_the_tracer(model: str, llama: str) -> None:
    arg = {"gpt": gpt_spec(), "custom": CUSTOM, "llama": llama}[model]
    module = build_model(arg)
    block = next(m for n, m in module.named_modules() if n.endswith("layers.0") or n == "stack.0")
    roles, norms, hidden = block_roles(block)
    rows = sorted(p for p, r in roles.items() if r == "row")
    assert hidden == 32 and len(norms) == 2
    assert rows == {"gpt": ["mlp.down_proj", "self_attn.o_proj"], "custom": ["attn.out", "ff.w_out"],
                    "llama": ["mlp.down_proj", "self_attn.o_proj"]}[model]
    assert len(roles) - len(rows) == {"gpt": 4, "custom": 4, "llama": 5}[model]  # q, k, v, up (, gate)


def test_plan_of_another_model_is_refused_with_one_line(llama: str) -> None:
    plan = make_plan(gpt_spec(layers=3), {"dp": 2}, spec=gpt_spec(layers=3))
    with pytest.raises(InputError, match=r"the plan has 6 layers .* but the module has 7") as err:
        preflight(plan, build_model(llama), 2, "cpu")
    assert "\n" not in str(err.value)


def test_same_layer_count_other_shapes_is_refused(llama: str) -> None:
    plan = make_plan(gpt_spec(), {"dp": 2}, spec=gpt_spec())
    with pytest.raises(InputError, match=r"parameters but the plan's model 'tiny-gpt' has"):
        preflight(plan, build_model(llama), 2, "cpu")


def test_world_size_is_checked_and_context_parallel_on_cpu_passes(llama: str) -> None:
    with pytest.raises(InputError, match=r"pp 1 x dp 4 x cp 1 x tp 1 = 4 processes, the world has 2"):
        preflight(make_plan(llama, {"dp": 4}), build_model(llama), 2, "cpu")
    assert preflight(make_plan(llama, {"cp": 2}), build_model(llama), 2, "cpu").units


def test_tied_weights_are_untied_for_tp_and_pp() -> None:
    """The runtime splits tied weights: the head gets a copy of its own (planner.runtime.tied), the
    original module keeps its tie, and preflight accepts the plan."""
    from planner.runtime.tied import TiedPair, untie

    spec = gpt_spec().model_copy(update={"tied_embeddings": True})
    tied = spec.model_copy(update={"layers": (spec.layers[0], *spec.layers[1:-1], spec.layers[-1].model_copy(update={"tied": True}))})
    plan, module = make_plan(tied, {"tp": 2}, spec=tied), build_model(tied)
    lmap = preflight(plan, module, 2, "cpu")
    assert lmap.tied
    copy, pairs = untie(module, lmap)
    assert pairs == [TiedPair("embed.token_weight", "head.weight")]
    assert copy.head.weight is not copy.embed.token_weight and module.head.weight is module.embed.token_weight


def test_apply_needs_a_process_group(llama: str) -> None:
    assert not dist.is_initialized()
    with pytest.raises(InputError, match="initialised process group"):
        planner.apply(make_plan(llama, {}), build_model(llama))


class _Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        q = self.lin(x).unsqueeze(1)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q).squeeze(1)


@pytest.mark.parametrize("mode, forwards", [("none", 1), ("full", 2), ("selective", 2)])
def test_recompute_reruns_the_forward_in_backward(mode: str, forwards: int) -> None:
    torch.manual_seed(0)
    plain, module = _Counting(), _Counting()
    module.load_state_dict(plain.state_dict())
    apply_recompute(module, mode)
    x = torch.randn(4, 3, 8)
    plain(x).square().sum().backward()
    module(x).square().sum().backward()
    assert module.calls == forwards
    torch.testing.assert_close(module.lin.weight.grad, plain.lin.weight.grad)


def test_selective_recompute_of_an_rmsnorm_preset_block_matches_plain_backward() -> None:
    """nn.RMSNorm mutates its own temporary (``mean(x^2).add_(eps)``): a policy that saved every op's
    output failed in backward ("Tensor cached during selective activation checkpoint has been mutated")."""
    from planner.intake.models.presets import build_preset
    from planner.runtime.models import Block

    spec = build_preset("llama3.1-8b").layers[1].model_copy(update=dict(hidden_size=32, num_heads=4, num_kv_heads=2,
                                                                         head_dim=8, ffn_hidden_size=64))
    torch.manual_seed(0)
    plain, module = Block(spec, rotary=True), Block(spec, rotary=True)
    module.load_state_dict(plain.state_dict())
    assert isinstance(module.attn_norm, nn.RMSNorm)
    apply_recompute(module, "selective")
    x = torch.randn(2, 16, 32)
    plain(x).square().sum().backward()
    module(x).square().sum().backward()
    for (name, p), q in zip(plain.named_parameters(), module.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)


def test_selective_policy_saves_sdpa_and_every_other_matmul() -> None:
    """torchtitan's op-level policy, which the cost model's torchtitan engine counts."""
    from torch.utils.checkpoint import CheckpointPolicy

    from planner.runtime.recompute import _op_level_policy

    aten, counts = torch.ops.aten, {}
    forward = type("Ctx", (), {"is_recompute": False})()
    decide = [_op_level_policy(counts, forward, op) for op in (aten.mm.default, aten.add.Tensor, aten.addmm.default,
                                                               aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default)]
    must, again = CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE
    assert decide == [must, again, again, must, must]


def test_a_plan_from_config_plan_applies_as_written(llama: str, fake_world) -> None:
    """``meshplan estimate ... -o plan.json`` (``planner.config_plan``) writes plans apply takes unchanged."""
    plan = planner.config_plan(model=llama, cluster=str(HERE / "data" / "laptop-cpu-4.json"), gpus=8, global_batch=8,
                               seq_len=16, tp=2, pp=2, zero=3, recompute="selective")
    fake_world(2, 8)
    runtime = planner.apply(plan, build_model(llama), device_type="cpu")
    assert runtime.mesh.mesh.shape == (2, 1, 2, 1, 2)  # pp, dp_replicate, dp_shard, cp, tp
    assert [u.index for u in runtime.stages[0].units] == plan.stages[0].layers
