"""A ReLU MLP keeps one 2-byte tensor per FFN element (``costmodel.memory.mlp_bytes_per_ffn_element``):
torch's saved-tensor hooks on the differential's traced custom block against the block's pricing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from costmodel.local import LocalConfig
from costmodel.memory import eager_block_extra_bytes, mlp_bytes_per_ffn_element, transformer_activation_bytes
from costmodel.specs import TransformerLayer

RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "planner" / "runtime"
B, S = 8, 16


def _saved_bytes(module: object, x: object) -> int:
    """Bytes of the distinct storages autograd saves for ``module(x)``, parameters excluded."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in params:
            seen.setdefault(key, t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    return sum(seen.values())


def test_relu_keeps_one_tensor_where_gelu_keeps_two() -> None:
    assert mlp_bytes_per_ffn_element("relu") == 2 and mlp_bytes_per_ffn_element("gelu") == 4
    torch = pytest.importorskip("torch")
    from torch import nn

    h, f = 32, 64
    x = torch.randn(B, S, h, dtype=torch.bfloat16, requires_grad=True)
    for act, per_f in ((nn.ReLU(), 2), (nn.GELU(), 4)):
        mlp = nn.Sequential(nn.Linear(h, f), act, nn.Linear(f, h)).to(torch.bfloat16)
        assert _saved_bytes(mlp, x) == B * S * (2 * h + per_f * f)  # FC1's input, then the MLP's own


def test_the_custom_block_keeps_what_its_pricing_says() -> None:
    """The custom model's block (LayerNorm, biased Q/K/V/out, SDPA, ReLU MLP) in bf16: what autograd
    keeps is the block's pricing plus the two LayerNorms' per-token statistics (mean and rstd,
    2 + 2 bytes each on the CPU dispatch), which no term prices."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(RUNTIME_TESTS))
    try:
        from custom_model import FFN, HEADS, HIDDEN, Layer
    finally:
        sys.path.remove(str(RUNTIME_TESTS))
    layer = TransformerLayer(hidden_size=HIDDEN, num_heads=HEADS, num_kv_heads=HEADS, head_dim=HIDDEN // HEADS,
                             ffn_hidden_size=FFN, ffn_act="relu", norm="layernorm", qkv_bias=True, out_bias=True, mlp_bias=True)
    cfg = LocalConfig(micro_batch=B, seq_len=S, tp=1, cp=1, ep=1, sp=False, recompute="none", flash=True, zero3_group=1)
    priced = transformer_activation_bytes(layer, cfg)[0] + eager_block_extra_bytes(layer, cfg)
    torch.manual_seed(0)
    x = torch.randn(B, S, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    norm_stats = 2 * 2 * 2 * B * S
    assert _saved_bytes(Layer().to(torch.bfloat16), x) == priced + norm_stats


def test_squared_relu_keeps_two_tensors_and_the_trace_tells_it_from_relu(tmp_path: Path) -> None:
    """relu(x).square() (Primer; the memory oracle's custom module): ReLU's output for ``square``'s
    backward and the square for FC2, 4 bytes per FFN element; the trace names it ``relu2``."""
    assert mlp_bytes_per_ffn_element("relu2") == 4
    torch = pytest.importorskip("torch")
    from torch import nn

    class Squared(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).square()

    h, f = 32, 64
    x = torch.randn(B, S, h, dtype=torch.bfloat16, requires_grad=True)
    mlp = nn.Sequential(nn.Linear(h, f), Squared(), nn.Linear(f, h)).to(torch.bfloat16)
    assert _saved_bytes(mlp, x) == B * S * (2 * h + 4 * f)
    from planner.intake.trace import model_from_factory

    spec = model_from_factory("planner.runtime.memcheck.cases:custom_lm", seq_len=256)
    assert {x.ffn_act for x in spec.layers if x.kind == "transformer"} == {"relu2"}
