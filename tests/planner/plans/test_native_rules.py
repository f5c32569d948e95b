"""Each native rule (``planner.plans.native_rules``): the validator refuses a hand-made configuration
by the rule's name, and the search never proposes one (a constraint asking for it is refused by name).
Every rule names the torch limitation and version behind it; ``tests/planner/runtime/test_zero_bubble.py``
shows the limitation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import planner
from planner.errors import InputError, NoFeasiblePlanError
from planner.plans.native_rules import NATIVE_RULES

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime"))
from differential_draw import MODEL_CONFIGS  # noqa: E402  (the harness's small models)

BASE = dict(cluster="dgx-a100", global_batch=8, seq_len=16)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("models")
    out = {}
    for name, config in MODEL_CONFIGS.items():
        (folder / f"{name}.json").write_text(json.dumps(config))
        out[name] = str(folder / f"{name}.json")
    return out


def _refused(rule: str, **settings: object) -> None:
    with pytest.raises(InputError, match=f"native rule {rule}:"):
        planner.config_plan(**BASE, **settings)


def _search_refuses(rule: str, **settings: object) -> None:
    with pytest.raises(InputError, match=f"native rule {rule}:"):
        planner.plan(**BASE, **settings)


def test_context_parallelism_is_no_rule(models: dict[str, str]) -> None:
    """Not a rule: the runtime shards the sequence over cp (planner.runtime.context_parallel)."""
    assert planner.config_plan(**BASE, model=models["llama"], gpus=2, tp=1, pp=1, cp=2).mesh.cp == 2
    assert planner.plan(**BASE, model=models["llama"], gpus=4, cp=2).mesh.cp == 2
    assert "native-cp" not in NATIVE_RULES


def test_expert_parallelism_is_no_rule(models: dict[str, str]) -> None:
    """Not a rule: the runtime shards experts over an EP group (planner.runtime.expert_parallel)."""
    assert planner.config_plan(**BASE, model=models["mixtral"], gpus=2, tp=1, pp=1, ep=2).mesh.ep == 2
    assert planner.plan(**BASE, model=models["mixtral"], gpus=4, ep=2).mesh.ep == 2


def test_tied_weights_split_is_no_rule(models: dict[str, str]) -> None:
    """Not a rule: the runtime unties and sums the copies' gradients (planner.runtime.tied)."""
    mesh = planner.config_plan(**BASE, model=models["gpt2"], gpus=4, tp=2, pp=2, schedule="1f1b").mesh
    assert (mesh.tp, mesh.pp) == (2, 2)


def test_moe_with_sequence_parallelism_is_no_rule(models: dict[str, str]) -> None:
    """Not a rule: the runtime runs the router and experts on the gathered sequence
    (planner.runtime.tensor_parallel)."""
    assert planner.config_plan(**BASE, model=models["mixtral"], gpus=2, tp=2, pp=1, sp=True).mesh.sp
    assert planner.plan(**BASE, model=models["mixtral"], gpus=2, tp=2, sp=True).mesh.sp
    assert "native-moe-sp" not in NATIVE_RULES


def test_zero_bubble_with_tp_is_no_rule(models: dict[str, str]) -> None:
    """Not a rule: the vocab-parallel loss leaves the stage as a copy, which zero-bubble's input-gradient
    backward can detach (planner.runtime.apply._vocab_sharded_loss)."""
    plan = planner.config_plan(**BASE, model=models["llama"], gpus=4, tp=2, pp=2, schedule="zb-h1", micro_batch=4)
    assert (plan.mesh.tp, plan.schedule.name) == (2, "zb-h1")
    assert planner.plan(**BASE, model=models["llama"], gpus=4, tp=2, pp=2, schedule="zb-h1").schedule.name == "zb-h1"
    assert "native-zb-h1-tp" not in NATIVE_RULES


def test_remaining_rules_name_torch_and_its_version() -> None:
    for rule, text in NATIVE_RULES.items():
        assert "torch" in text and "2.13.0" in text, rule


def test_zero_bubble_needs_whole_rounds(models: dict[str, str]) -> None:
    five = dict(BASE, global_batch=10)
    with pytest.raises(InputError, match="native rule native-zb-h1-rounds:"):
        planner.config_plan(**five, model=models["llama"], gpus=2, tp=1, pp=2, schedule="zb-h1", micro_batch=2)
    with pytest.raises((InputError, NoFeasiblePlanError)):  # 5 micro-batches over pp 2: 2 rounds, not whole
        planner.plan(**five, model=models["llama"], gpus=2, pp=2, schedule="zb-h1", micro_batch=2)


def test_one_f_one_b_with_fewer_micro_batches_than_stages_is_valid(models: dict[str, str]) -> None:
    """Not a rule: the runtime runs it (as GPipe, 1F1B's order when every micro-batch warms up)."""
    plan = planner.config_plan(**BASE, model=models["llama"], gpus=2, tp=1, pp=2, schedule="1f1b", micro_batch=8)
    assert plan.schedule.num_microbatches == 1


def test_zero_bubble_takes_no_selective_recomputation(models: dict[str, str]) -> None:
    _refused("native-zb-h1-selective", model=models["llama"], gpus=2, tp=1, pp=2, schedule="zb-h1", micro_batch=2,
             recompute="selective")
    _search_refuses("native-zb-h1-selective", model=models["llama"], gpus=2, schedule="zb-h1", recompute="selective")
    plan = planner.plan(**BASE, model=models["llama"], gpus=2, pp=2, schedule="zb-h1", micro_batch=2)
    assert "selective" not in {m for s in plan.stages for m in s.layer_recompute}
