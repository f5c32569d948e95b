"""Models whose blocks differ, for ``bench/search_speed.py`` (issue 14): planned in a fresh process as
``meshplan plan`` would, from specs built here (DeepSeek-V3 is the ``deepseek-v3`` preset now, with
multi-head latent attention, and ``bench/search_speed.py`` plans it through the CLI).

Usage: python bench/mixed_models.py NAME CLUSTER GPUS GLOBAL_BATCH SEQ_LEN OUT_JSON [TARGET]

- ``alternating-moe-12``: a Qwen2-MoE-style model of 12 blocks alternating dense (SwiGLU 5,632) and
  MoE (60 experts, top-4, width 1,408, shared expert 5,632) blocks; hidden 2,048, 16 heads,
  vocabulary 151,936 (Qwen1.5-MoE-A2.7B's widths, config.json of Qwen/Qwen1.5-MoE-A2.7B).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages, not an installed copy

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, TransformerLayer  # noqa: E402


def _model(name: str, hidden: int, vocab: int, blocks: tuple[TransformerLayer, ...]) -> ModelSpec:
    return ModelSpec(name=name, layers=(EmbeddingLayer(vocab_size=vocab, hidden_size=hidden),) + blocks
                     + (NormLayer(hidden_size=hidden, norm="rmsnorm"), HeadLayer(vocab_size=vocab, hidden_size=hidden)))


def alternating_moe_12() -> ModelSpec:
    """12 blocks alternating dense and MoE (Qwen2-MoE style widths)."""
    dense = TransformerLayer(name="dense_block", hidden_size=2048, num_heads=16, num_kv_heads=16, head_dim=128,
                             ffn_hidden_size=5632, ffn_act="swiglu", norm="rmsnorm", qkv_bias=True)
    moe = dense.model_copy(update={"name": "moe_block", "ffn_hidden_size": 1408, "num_experts": 60, "moe_top_k": 4,
                                   "shared_expert_ffn_hidden_size": 5632})
    return _model("alternating-moe-12", 2048, 151936, tuple(moe if i % 2 else dense for i in range(12)))


BUILDERS = {"alternating-moe-12": alternating_moe_12}


def main(argv: list[str]) -> int:
    name, cluster, gpus, batch, seq, out = argv[1:7]
    target = argv[7] if len(argv) > 7 else "native"
    import planner

    plan = planner.plan(model=BUILDERS[name](), cluster=cluster, gpus=int(gpus), global_batch=int(batch), seq_len=int(seq),
                        target=target, timing=True)
    planner.save_plan(plan, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
