"""The serving search space: the instances a model can run as, and the batches worth trying."""

from __future__ import annotations

from collections.abc import Iterator

from costmodel.serving.shape import ModelShape
from costmodel.serving.specs import Instance

DEGREES = (1, 2, 4, 8, 16, 32, 64)
"""TP and PP degrees tried (powers of two, as the engines' kernels and NCCL rings prefer)."""
PP_DEGREES = (1, 2, 4, 8)


def instances(shape: ModelShape, gpus: int, gpus_per_node: int) -> Iterator[Instance]:
    """Every instance of at most ``gpus`` GPUs: TP inside one NVLink domain dividing the heads (or
    any TP with attention DP), PP over whole TP groups; for MoE, EP of 1 or tp, with and without
    attention DP, and wide EP with attention DP across nodes (DeepSeek-V3's 320-GPU decode
    deployment, arXiv:2412.19437 §3.4.2)."""
    for tp in DEGREES:
        if tp > gpus:
            break
        if tp > gpus_per_node:  # past one NVLink domain only wide expert parallelism pays
            if shape.is_moe and shape.num_experts % tp == 0:
                yield Instance(tp=tp, ep=tp, attention_dp=True)
            continue
        for pp in PP_DEGREES:
            if tp * pp > gpus or pp > shape.num_layers:
                break
            yield from _variants(shape, tp, pp)


def _variants(shape: ModelShape, tp: int, pp: int) -> Iterator[Instance]:
    plain = shape.min_heads % tp == 0
    if not shape.is_moe:
        if plain:
            yield Instance(tp=tp, pp=pp)
        return
    for ep in sorted({1, tp}):
        if tp % ep or shape.num_experts % ep:
            continue
        if plain:
            yield Instance(tp=tp, pp=pp, ep=ep)
        if tp > 1:
            yield Instance(tp=tp, pp=pp, ep=ep, attention_dp=True)


def batches(most: int) -> list[int]:
    """1, 2, 4, ... below ``most``, and ``most`` itself (empty when nothing fits)."""
    out, b = [], 1
    while b < most:
        out.append(b)
        b *= 2
    if most >= 1:
        out.append(most)
    return out
