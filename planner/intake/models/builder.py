"""Assemble a decoder-only language model spec: embedding, transformer blocks, final norm, head.

Presets and Hugging Face configs both end here, so the two intakes build identical specs for
identical architectures. Identical blocks are one shared (frozen) object repeated in the layers
tuple, which keeps a 126-layer model as cheap to build as a 1-layer one.
"""

from __future__ import annotations

from collections.abc import Sequence

from costmodel.specs import (
    EmbeddingLayer,
    HeadLayer,
    ModelSpec,
    NormKind,
    NormLayer,
    TransformerLayer,
)

__all__ = ["decoder_lm", "share_equal_blocks"]


def share_equal_blocks(blocks: Sequence[TransformerLayer]) -> tuple[TransformerLayer, ...]:
    """Return ``blocks`` with runs of equal blocks sharing one object (equal by value, not by name).

    Blocks that differ (a sliding-window layer next to a full-attention one, a dense layer before
    MoE layers) stay distinct; equal ones are replaced by the first object seen with that value.
    """
    seen: dict[TransformerLayer, TransformerLayer] = {}
    return tuple(seen.setdefault(block, block) for block in blocks)


def decoder_lm(
    name: str,
    *,
    blocks: Sequence[TransformerLayer],
    vocab_size: int,
    tied_embeddings: bool,
    max_seq_len: int,
    source: str,
    learned_positions: int = 0,
    embedding_norm: NormKind | None = None,
) -> ModelSpec:
    """Build a decoder-only LM spec around ``blocks``.

    ``learned_positions`` is the row count of a learned absolute position table (0 for rotary or
    ALiBi); ``embedding_norm`` is a norm right after the lookup (BLOOM). The final norm has the
    kind of the blocks' norms.
    """
    if not blocks:
        raise ValueError("a decoder LM needs at least one transformer block")
    hidden = blocks[0].hidden_size
    embedding = EmbeddingLayer(
        vocab_size=vocab_size,
        hidden_size=hidden,
        max_positions=learned_positions,
        norm=embedding_norm,
    )
    final_norm = NormLayer(hidden_size=hidden, norm=blocks[0].norm)
    head = HeadLayer(vocab_size=vocab_size, hidden_size=hidden, tied=tied_embeddings)
    return ModelSpec(
        name=name,
        layers=(embedding, *share_equal_blocks(blocks), final_norm, head),
        tied_embeddings=tied_embeddings,
        max_seq_len=max_seq_len,
        source=source,
    )
