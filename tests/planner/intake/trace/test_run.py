"""Running a trace: export / meta / fake agree, blocks that need data go opaque, failures are one line."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from planner.errors import InputError
from planner.intake.trace.load import load_factory, token_ids
from planner.intake.trace.run import run_trace
from planner.intake.trace.stubs import OPAQUE
from planner.intake.trace.units import find_units


def _run(module: nn.Module, method: str, args: tuple | None = None):
    module.train()
    args = args if args is not None else (token_ids(2, 64),)
    return run_trace(module, find_units(module), args, {}, label="m", method=method)


def _summary(raw) -> list[tuple[str, str | None, float]]:
    return [(i.name, i.stub_of, sum(op.flops for op in i.ops)) for i in raw.instances]


def test_the_three_methods_record_the_same_layers_and_flops(zoo) -> None:
    with torch.device("meta"):
        module = zoo.gpt()
    traces = {method: _run(module, method) for method in ("export", "meta", "fake")}
    assert {raw.method for raw in traces.values()} == {"export", "meta", "fake"}
    first = _summary(traces["export"])
    assert [name for name, _, _ in first] == ["wte", "wpe", "blocks.0", "blocks.1", "blocks.2", "ln_f", "head"]
    assert [stub for _, stub, _ in first][2:5] == [None, "blocks.0", "blocks.0"]
    assert _summary(traces["meta"]) == first and _summary(traces["fake"]) == first


def test_routing_blocks_run_under_balanced_representative_routing(zoo, factory) -> None:
    module, _ = load_factory(factory("mixtral"))
    raw = _run(module, "auto")
    assert raw.opaque == frozenset() and raw.method == "meta"
    m = zoo.MIXTRAL
    per_expert = 2 * 64 * m["top_k"] // m["experts"]
    for e in range(m["experts"]):
        w1 = [op for op in raw.instances[1].ops if op.module.endswith(f"experts.{e}.w1") and op.kind == "matmul"]
        assert [op.dims[0] for op in w1] == [per_expert], "every expert gets tokens x k / E tokens"


class DataBranchMoe(nn.Module):
    """An expert block that branches on activation values (not on a routing decision): cannot run."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.abs().max().item() > 1e4:
            x = x / 2
        return self.inner(x)


def test_blocks_that_branch_on_data_become_opaque_and_the_rest_traces(zoo, factory) -> None:
    module, _ = load_factory(factory("mixtral"))
    for i, layer in enumerate(module.layers):
        layer.block_sparse_moe = DataBranchMoe(layer.block_sparse_moe)
    raw = _run(module, "auto")
    assert raw.opaque == {"layers.0", "layers.1"}
    blocks = [i for i in raw.instances if i.unit.startswith("layers.")]
    assert [i.stub_of for i in blocks] == [OPAQUE, OPAQUE]
    assert raw.instances[-1].name == "lm_head" and raw.instances[-1].ops


def test_export_failures_print_nothing(zoo, factory, capfd) -> None:
    module, _ = load_factory(factory("mixtral"))
    _run(module, "export")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


class ValueDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.gate = nn.Linear(8, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        return self.gate(x) if float(x.sum()) > 0 else x


def test_an_untraceable_model_names_the_module_op_and_the_config_path() -> None:
    with torch.device("meta"):
        module = ValueDependent()
    with pytest.raises(InputError) as err:
        _run(module, "auto")
    message = str(err.value)
    assert "\n" not in message
    assert "aten._local_scalar_dense" in message and "without --trace" in message
    assert "cannot trace m" in message


def test_unknown_method_is_bad_input(zoo) -> None:
    with torch.device("meta"):
        module = zoo.gpt()
    with pytest.raises(InputError, match="unknown trace method"):
        _run(module, "jit")


def test_hugging_face_llama_runs_on_meta_export_and_fake_alike(tmp_path) -> None:
    import json

    from planner.intake.trace.load import hf_model

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 100}))
    module, _, _ = hf_model(str(path))
    # the mask code calls .item() on a tensor built from constants: its real value answers (shadow)
    exported, fake, meta = _run(module, "export"), _run(module, "fake"), _run(module, "meta")
    assert _summary(fake) == _summary(exported) == _summary(meta)
    attention = [op for i in fake.instances for op in i.ops if op.kind == "attention"]
    assert attention and all(op.causal for op in attention)  # read from the mask's real values
