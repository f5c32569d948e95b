"""The public API on whole models: a GPT and its config.json twin, Llama 3.1 8B from its config,
and the vision, encoder-decoder, recommendation and MoE models of the zoo.

FLOP convention (``costmodel.flops``): causal self-attention counts half of the s x s work, so a GPT's
forward FLOPs are ``24·B·s·l·h²·(1 + s/(12h) + V/(12·l·h))``: one third of Narayanan et al.'s
``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))`` (forward + backward, full attention), with the attention
term halved.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch import nn

import planner
from costmodel.flops import model_flops_per_step
from costmodel.params import count_params
from costmodel.specs import EmbeddingLayer, GenericLayer, HeadLayer, NormLayer, TransformerLayer
from planner.intake.models import resolve_model
from planner.intake.trace import model_from_factory, model_from_hf_config, model_from_module, trace_module
from planner.intake.trace.load import load_factory

B, S = 2, 128


def _gpt_forward_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 appendix, forward only, causal attention halved (module docstring)."""
    return 24 * batch * seq * layers * hidden**2 * (1 + seq / (12 * hidden) + vocab / (12 * layers * hidden))


def _same_but_names(a, b, exclude: frozenset[str] = frozenset()) -> bool:
    drop = {"name", *exclude}
    return [x.model_dump(exclude=drop) for x in a.layers] == [y.model_dump(exclude=drop) for y in b.layers]


def _estimate(spec, **kw):
    args = dict(cluster="dgx-h100", gpus=8, global_batch=32, seq_len=S, tp=2, pp=2) | kw
    return planner.estimate(model=spec, **args)


@pytest.fixture(scope="module")
def gpt_trace(zoo, factory):
    module, make_inputs = load_factory(factory("gpt"))
    return module, trace_module(module, make_inputs, name="gpt", micro_batch=B, seq_len=S)


def test_gpt_params_flops_and_shape(zoo, gpt_trace) -> None:
    module, trace = gpt_trace
    g = zoo.GPT
    spec = trace.spec
    assert count_params(spec) == sum(p.numel() for p in module.parameters()) == trace.params
    assert [type(x) for x in spec.layers] == [EmbeddingLayer] + [TransformerLayer] * 3 + [NormLayer, HeadLayer]
    assert spec.tied_embeddings and spec.layers[0].max_positions == g["positions"] and spec.max_seq_len == 256
    expected = _gpt_forward_flops(B, S, g["layers"], g["hidden"], g["vocab"])
    assert trace.fwd_flops == pytest.approx(expected, rel=1e-2)
    assert model_flops_per_step(spec.layers, B, S) / 3 == pytest.approx(expected, rel=1e-2)


def test_gpt_matches_its_config_json_twin(zoo, gpt_trace, tmp_path) -> None:
    g = zoo.GPT
    # the hand-written GPT runs nn.GELU() (exact), which a GPT-2 config.json names "gelu" (its default is gelu_new)
    config = {"model_type": "gpt2", "vocab_size": g["vocab"], "n_positions": g["positions"], "n_embd": g["hidden"],
              "n_layer": g["layers"], "n_head": g["heads"], "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
              "activation_function": "gelu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    # transformers' GPT-2 blocks are Conv1D (``conv1d``: the native runtime keeps them whole under TP) and run as
    # transformers' own module (``transformers_block``: its memory layout); the hand-written GPT's are nn.Linear in
    # a block of its own: the twins agree on everything else
    twin = resolve_model(str(path))
    assert all(layer.conv1d and layer.transformers_block for layer in twin.layers if layer.kind == "transformer")
    plain = {"conv1d": False, "transformers_block": False}
    twin = twin.model_copy(update={"layers": tuple(layer.model_copy(update=plain) if layer.kind == "transformer"
                                                   else layer for layer in twin.layers)})
    traced = gpt_trace[1].spec
    assert count_params(twin) == count_params(traced)
    flops = model_flops_per_step(traced.layers, 64, S), model_flops_per_step(twin.layers, 64, S)
    assert flops[0] == pytest.approx(flops[1], rel=1e-2)
    assert _same_but_names(traced, twin)
    a, b = _estimate(traced).step_time_s, _estimate(twin).step_time_s
    assert a == pytest.approx(b, rel=3e-2)


def test_hugging_face_gpt2_traces_like_the_hand_written_one(zoo, gpt_trace, tmp_path) -> None:
    g = zoo.GPT
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": g["vocab"],
              "n_positions": g["positions"], "n_embd": g["hidden"], "n_layer": g["layers"], "n_head": g["heads"],
              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "bos_token_id": 0, "eos_token_id": 0}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    spec = model_from_hf_config(str(path), micro_batch=B, seq_len=S)
    # transformers' GPT-2 MLP runs the tanh GELU op by op (gelu_new); the hand-written one nn.GELU()
    acts = [(getattr(x, "ffn_act", None), getattr(y, "ffn_act", None)) for x, y in zip(spec.layers, gpt_trace[1].spec.layers)]
    assert {a for a in acts if a != (None, None)} == {("gelu_tanh", "gelu")}
    assert all(x.transformers_block for x in spec.layers if x.kind == "transformer")  # traced as transformers' block
    # transformers' Conv1D in transformers' own block vs nn.Linear in the hand-written one
    assert _same_but_names(spec, gpt_trace[1].spec, frozenset({"ffn_act", "conv1d", "transformers_block"}))


LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B/config.json
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16",
}


def test_llama_31_8b_config_traced_matches_the_preset(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31_8B))
    traced = model_from_hf_config(str(path))
    preset = resolve_model("llama3.1-8b")
    assert count_params(traced) == count_params(preset) == 8_030_261_248
    for seq in (2048, 8192):
        expected = model_flops_per_step(preset.layers, 8, seq)
        assert model_flops_per_step(traced.layers, 8, seq) == pytest.approx(expected, rel=1e-2)
    # the traced blocks are transformers' LlamaDecoderLayer, the preset's planner.runtime.models.Block
    assert all(x.transformers_block for x in traced.layers if x.kind == "transformer")
    assert _same_but_names(traced, preset, frozenset({"transformers_block"})) and traced.max_seq_len == 131072
    a = _estimate(traced, seq_len=4096, global_batch=64).step_time_s
    b = _estimate(preset, seq_len=4096, global_batch=64).step_time_s
    assert a == pytest.approx(b, rel=3e-2)


def _traced(factory, name: str):
    module, make_inputs = load_factory(factory(name))
    trace = trace_module(module, make_inputs, name=name, micro_batch=B, seq_len=S)
    assert count_params(trace.spec) == sum(p.numel() for p in module.parameters())
    return module, trace


def test_vit_is_patches_of_non_causal_blocks(factory) -> None:
    _, trace = _traced(factory, "vit")
    spec = trace.spec
    assert spec.tokens_per_sample == 17  # 4 x 4 patches and the class token
    blocks = [x for x in spec.layers if isinstance(x, TransformerLayer)]
    assert len(blocks) == 4 and not blocks[0].causal and blocks[0].head_dim == 24
    conv, head = spec.layers[0], spec.layers[-1]
    assert conv.tp_mode == "none" and conv.fwd_flops_per_token == pytest.approx(2 * 3 * 16 * 16 * 96 * 16 / 17)
    assert isinstance(head, GenericLayer) and head.tp_mode == "column"


def test_resnet50_is_convolution_stages(factory) -> None:
    module, trace = _traced(factory, "resnet50")
    spec = trace.spec
    assert sum(p.numel() for p in module.parameters()) == 25_557_032  # torchvision resnet50
    assert spec.tokens_per_sample == 1 and len(spec.layers) == 19
    assert all(isinstance(x, GenericLayer) for x in spec.layers)
    assert {x.tp_mode for x in spec.layers[:-1]} == {"none"} and spec.layers[-1].tp_mode == "column"
    per_image = sum(x.fwd_flops_per_token for x in spec.layers)
    assert per_image == pytest.approx(8.2e9, rel=0.02)  # 4.1 GMACs per 224 x 224 image (He et al. 2016)


def test_t5_style_encoder_decoder_has_cross_attention_edges(factory) -> None:
    _, trace = _traced(factory, "t5")
    spec = trace.spec
    kinds = [x.kind for x in spec.layers]
    assert kinds == ["embedding", "transformer", "transformer", "norm", "generic", "transformer", "transformer",
                     "norm", "head"]
    encoder, decoder = spec.layers[1], spec.layers[5]
    assert not encoder.causal and not encoder.cross_attention and decoder.causal and decoder.cross_attention
    assert encoder.ffn_act == "relu" and spec.layers[4].sparse_lookup  # the shared table's second lookup
    assert [(e.src, e.dst) for e in spec.extra_edges] == [(3, 5), (3, 6)]  # encoder output -> decoder blocks
    assert all(e.bytes_per_token == 64 * 2 for e in spec.extra_edges)


def test_dlrm_tables_larger_than_a_gpu_are_row_sharded(zoo, factory) -> None:
    _, trace = _traced(factory, "dlrm")
    spec = trace.spec
    tables = next(x for x in spec.layers if x.sparse_lookup)
    assert tables.params == sum(zoo.DLRM_TABLES) * zoo.DLRM_DIM
    assert tables.params * 2 > 80 * 2**30 and tables.tp_mode == "vocab"
    assert [x.tp_mode for x in spec.layers[:3]] == ["column", "row", "column"]
    assert spec.tokens_per_sample == 1
    result = _estimate(spec, tp=8, pp=1, zero=3, global_batch=1024)
    assert result.step_time_s > 0


def test_mixtral_style_moe_blocks(zoo, factory) -> None:
    _, trace = _traced(factory, "mixtral")
    spec = trace.spec
    blocks = [x for x in spec.layers if isinstance(x, TransformerLayer)]
    m = zoo.MIXTRAL
    assert len(blocks) == m["layers"]
    found = (blocks[0].num_experts, blocks[0].moe_top_k, blocks[0].num_kv_heads)
    assert found == (m["experts"], m["top_k"], m["kv_heads"])
    assert trace.layers[1].stub_of is None and trace.layers[1].ops > 0, "runs under representative routing"
    assert _estimate(spec, ep=2).step_time_s > 0


def test_model_from_module_leaves_a_real_module_untouched(zoo) -> None:
    torch.manual_seed(0)
    module = zoo.GPT2(vocab=50, positions=16, hidden=16, heads=2, layers=2)
    before = module.wte.weight.clone()
    spec = model_from_module(module, name="small", seq_len=16)
    assert module.wte.weight.device.type == "cpu" and torch.equal(module.wte.weight, before)
    assert module.head.weight is module.wte.weight and module.training
    assert count_params(spec) == sum(p.numel() for p in module.parameters()) and spec.name == "small"


def test_model_from_factory_by_package_path(tmp_path, monkeypatch) -> None:
    (tmp_path / "mp_factory_pkg.py").write_text(
        "from torch import nn\n"
        "def build():\n"
        "    return nn.Sequential(nn.Embedding(100, 32), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 100))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = model_from_factory("mp_factory_pkg:build", seq_len=32)
    assert spec.source == "traced:mp_factory_pkg:build"
    assert [x.kind for x in spec.layers] == ["generic", "generic", "generic"]
    assert [x.tp_mode for x in spec.layers] == ["vocab", "column", "row"]
    sys.modules.pop("mp_factory_pkg", None)


def test_bad_sizes_are_bad_input(zoo) -> None:
    with torch.device("meta"):
        module = zoo.gpt()
    with pytest.raises(planner.InputError):
        trace_module(module, seq_len=0)


def test_unused_parameters_are_kept(zoo) -> None:
    class WithSpare(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used, self.spare = nn.Linear(8, 8), nn.Linear(8, 4)

        def forward(self, x):
            return self.used(x)

    spec = model_from_module(WithSpare(), lambda b, s: torch.randn(b, s, 8))
    assert spec.layers[-1].name == "unused_parameters" and spec.layers[-1].params == 36
