"""Trace time of Llama-style models of 32, 80 and 126 layers (Llama 3.1 8B, 70B, 405B shapes).

    python bench/trace_speed.py [--seq-len 4096] [--method auto]

Each model is built on the meta device and traced once; repeated blocks are traced once for all, so
the time should stay roughly flat with depth (issue 4 target: under 10 s for 126 layers). Two
versions of each model are timed: a plain ``torch.nn`` Llama (below) and, when ``transformers`` is
installed, Hugging Face's ``LlamaForCausalLM`` built from the matching config.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.intake.trace import trace_module  # noqa: E402

SHAPES = {  # layers: (hidden, heads, ffn), meta-llama/Llama-3.1-{8B,70B,405B}/config.json
    32: (4096, 32, 14336),
    80: (8192, 64, 28672),
    126: (16384, 128, 53248),
}
KV_HEADS, VOCAB = 8, 128256


class Block(nn.Module):
    """Pre-norm decoder block: GQA self-attention (SDPA, causal) and a SwiGLU MLP, RMSNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
        self.self_attn = nn.ModuleDict({
            "q_proj": nn.Linear(hidden, hidden, bias=False),
            "k_proj": nn.Linear(hidden, KV_HEADS * self.head_dim, bias=False),
            "v_proj": nn.Linear(hidden, KV_HEADS * self.head_dim, bias=False),
            "o_proj": nn.Linear(hidden, hidden, bias=False),
        })
        self.mlp = nn.ModuleDict({
            "gate_proj": nn.Linear(hidden, ffn, bias=False), "up_proj": nn.Linear(hidden, ffn, bias=False),
            "down_proj": nn.Linear(ffn, hidden, bias=False),
        })

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y, a = self.input_layernorm(x), self.self_attn
        q = a["q_proj"](y).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = a["k_proj"](y).view(b, s, KV_HEADS, self.head_dim).transpose(1, 2)
        v = a["v_proj"](y).view(b, s, KV_HEADS, self.head_dim).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + a["o_proj"](o.transpose(1, 2).reshape(b, s, h))
        y, m = self.post_attention_layernorm(x), self.mlp
        return x + m["down_proj"](F.silu(m["gate_proj"](y)) * m["up_proj"](y))


class Llama(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        hidden, heads, ffn = SHAPES[layers]
        self.embed_tokens = nn.Embedding(VOCAB, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def _plain(layers: int) -> nn.Module:
    with torch.device("meta"):
        return Llama(layers)


def _hugging_face(layers: int) -> nn.Module:
    import transformers

    hidden, heads, ffn = SHAPES[layers]
    config = transformers.LlamaConfig(
        hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=KV_HEADS, intermediate_size=ffn,
        num_hidden_layers=layers, vocab_size=VOCAB, use_cache=False, tie_word_embeddings=False,
    )
    with torch.device("meta"):
        return transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--method", default="auto", choices=("auto", "export", "meta", "fake"))
    args = parser.parse_args()
    builders = {"torch.nn": _plain}
    if importlib.util.find_spec("transformers") is not None:
        builders["transformers"] = _hugging_face
    else:
        print("transformers not installed: timing the plain torch.nn Llama only")
    print(f"{'model':>13} {'layers':>6} {'params':>16} {'build_s':>8} {'trace_s':>8}  method")
    for label, build in builders.items():
        for layers in SHAPES:
            start = time.perf_counter()
            module = build(layers)
            built = time.perf_counter() - start
            trace = trace_module(module, name=f"llama-{layers}", seq_len=args.seq_len, method=args.method)
            print(f"{label:>13} {layers:>6} {trace.params:>16,} {built:>8.2f} {trace.seconds:>8.2f}  {trace.method}")


if __name__ == "__main__":
    main()
