"""The serving presets against their published parameter counts."""

from __future__ import annotations

import pytest

from planner.intake.models import model_summary, resolve_model


@pytest.mark.parametrize(("name", "total_b", "active_b", "tol"), [
    ("deepseek-r1", 671.0, 37.0, 0.6),        # DeepSeek-R1 / V3 (arXiv:2412.19437): 671B total, 37B activated
    ("llama3.3-70b", 70.6, 70.6, 0.1),        # Meta Llama 3.3 model card: 70B (70.55B in the checkpoint)
    ("llama2-70b", 69.0, 69.0, 0.1),          # Touvron et al. 2023 (arXiv:2307.09288): 70B (68.98B in the checkpoint)
])
def test_parameter_counts_match_the_publications(name: str, total_b: float, active_b: float, tol: float) -> None:
    summary = model_summary(resolve_model(name))
    assert summary["total_params"] / 1e9 == pytest.approx(total_b, abs=tol)
    assert summary["active_params"] / 1e9 == pytest.approx(active_b, abs=tol)


def test_gpt_oss_alternates_a_128_token_window() -> None:
    blocks = [layer for layer in resolve_model("gpt-oss-120b").layers if getattr(layer, "kind", "") == "transformer"]
    assert [b.sliding_window for b in blocks[:4]] == [128, None, 128, None]
    assert blocks[0].num_experts == 128 and blocks[0].moe_top_k == 4 and blocks[0].head_dim == 64


def test_gpt_oss_matches_its_model_card_exactly() -> None:
    """OpenAI gpt-oss model card, parameter table: 116.83B total; 5.13B active per token, which counts
    the unembedding but not the embedding lookup (0.58B of 201,088 x 2,880)."""
    summary = model_summary(resolve_model("gpt-oss-120b"))
    assert summary["total_params"] / 1e9 == pytest.approx(116.83, abs=0.01)
    embedding = 201_088 * 2_880
    assert (summary["active_params"] - embedding) / 1e9 == pytest.approx(5.13, abs=0.01)
