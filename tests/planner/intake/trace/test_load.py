"""Loading: factory references, the factory contract, meta replicas, example inputs, HF configs."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from planner.errors import InputError
from planner.intake.trace.load import example_inputs, hf_model, load_factory, meta_replica, split_inputs


def test_factory_runs_on_meta_and_may_return_inputs(factory) -> None:
    module, make_inputs = load_factory(factory("vit"))
    assert all(p.device.type == "meta" for p in module.parameters())
    args, kwargs, sequence = example_inputs(make_inputs, 2, 128)
    assert args[0].shape == (2, 3, 64, 64) and args[0].device.type == "meta" and not kwargs and not sequence


def test_default_inputs_are_token_ids() -> None:
    args, kwargs, sequence = example_inputs(None, 3, 7)
    assert args[0].shape == (3, 7) and args[0].dtype == torch.int64 and sequence


def test_dict_inputs_follow_the_sequence(factory) -> None:
    _, make_inputs = load_factory(factory("t5"))
    args, kwargs, sequence = example_inputs(make_inputs, 2, 16)
    assert not args and set(kwargs) == {"input_ids", "decoder_input_ids"} and sequence
    assert split_inputs((1, 2)) == ((1, 2), {}) and split_inputs(5) == ((5,), {})


@pytest.mark.parametrize("arg, fragment", [
    ("no_colon", "must look like"),
    ("/nowhere/model.py:build", "not found"),
    ("surely_missing_package_x:build", "cannot import"),
    ("json:not_there", "no callable"),
    ("json:loads", "raised TypeError"),
])
def test_bad_factory_references_are_one_line(arg: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment) as err:
        load_factory(arg)
    assert "\n" not in str(err.value)


def test_factory_must_return_a_module(tmp_path) -> None:
    path = tmp_path / "f.py"
    path.write_text("def five():\n    return 5\ndef pair():\n    import torch\n    return torch.nn.Linear(2, 2), 3\n")
    with pytest.raises(InputError, match="not an nn.Module"):
        load_factory(f"{path}:five")
    with pytest.raises(InputError, match="make_inputs"):
        load_factory(f"{path}:pair")


def test_meta_replica_copies_no_data_and_keeps_ties() -> None:
    module = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    module[1].weight = module[0].weight
    module.register_buffer("scale", torch.ones(3))
    replica = meta_replica(module)
    assert replica is not module and replica[1].weight is replica[0].weight
    assert all(t.device.type == "meta" for t in [*replica.parameters(), *replica.buffers()])
    assert module[0].weight.device.type == "cpu"
    assert meta_replica(replica) is replica


def test_hf_config_builds_on_meta_without_cache(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 100}))
    module, make_inputs, _ = hf_model(str(tmp_path))
    assert type(module).__name__ == "LlamaForCausalLM" and make_inputs is None
    assert module.config.use_cache is False and next(module.parameters()).device.type == "meta"


def test_unreadable_hf_config_is_bad_input(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "no-such-family"}))
    with pytest.raises(InputError, match="cannot read"):
        hf_model(str(path))
