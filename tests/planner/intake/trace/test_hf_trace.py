"""``--trace`` of a Hugging Face config.json reaches the tracer from ``estimate`` too, and a
transformers import failure is bad input (exit 2), not an internal error (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import planner
from planner.errors import InputError

QWEN2_MOE = dict(model_type="qwen2_moe", architectures=["Qwen2MoeForCausalLM"], hidden_size=64,
                 intermediate_size=176, moe_intermediate_size=32, shared_expert_intermediate_size=176,
                 num_experts=8, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=4, vocab_size=512, max_position_embeddings=512)


def _config(tmp_path: Path, content: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))
    return str(path)


def test_estimate_with_trace_traces_the_config(tmp_path: Path) -> None:
    path = _config(tmp_path, QWEN2_MOE)
    run = dict(cluster="dgx-a100", gpus=8, global_batch=16, seq_len=256, tp=2, pp=1)
    traced = planner.estimate(model=path, trace=True, **run)
    read = planner.estimate(model=path, **run)
    assert any("traced expert blocks" in a for a in traced.assumptions)
    assert not any("traced" in a for a in read.assumptions)
    assert traced.step_time_s == pytest.approx(read.step_time_s, rel=0.03)


def test_an_import_error_inside_transformers_is_bad_input(tmp_path: Path, monkeypatch) -> None:
    import planner.intake.trace.load as load

    def missing(*args, **kwargs):
        raise ImportError("this model needs the flash_attn package")

    monkeypatch.setattr(load, "_build_hf", missing)
    with pytest.raises(InputError, match="transformers cannot build .* ImportError: this model needs flash_attn|flash_attn"):
        load.hf_model(_config(tmp_path, QWEN2_MOE))


def test_cli_estimate_trace_exits_2_on_an_unknown_architecture(tmp_path: Path) -> None:
    path = _config(tmp_path, dict(QWEN2_MOE, model_type="no_such_model", architectures=["NoSuchModel"]))
    proc = subprocess.run([sys.executable, "cli.py", "estimate", "--model", path, "--trace", "--cluster", "dgx-a100",
                           "--gpus", "8", "--global-batch", "16", "--seq-len", "256", "--tp", "2", "--pp", "1"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[4])
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_deepseek_v2_lite_traces_as_the_mla_blocks_its_config_describes(tmp_path: Path) -> None:
    """DeepseekV2ForCausalLM without a query latent (V2-Lite: ``q_proj`` from h, ``kv_a_proj_with_mqa``,
    ``kv_b_proj``) and with 2 shared experts: the traced blocks are the config's MLA/MoE blocks."""
    from costmodel.specs import TransformerLayer
    from planner.intake.arguments import resolve_model_arg

    path = _config(tmp_path, dict(model_type="deepseek_v2", architectures=["DeepseekV2ForCausalLM"], hidden_size=64,
                                  intermediate_size=160, moe_intermediate_size=24, n_routed_experts=8, n_shared_experts=2,
                                  num_experts_per_tok=2, first_k_dense_replace=1, num_hidden_layers=3, num_attention_heads=4,
                                  num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=8,
                                  qk_nope_head_dim=16, v_head_dim=16, vocab_size=512, max_position_embeddings=512))
    traced, read = resolve_model_arg(path, True), resolve_model_arg(path)
    blocks = lambda spec: [x.model_copy(update={"name": "block"}) for x in spec.layers if isinstance(x, TransformerLayer)]  # noqa: E731
    assert blocks(traced) == blocks(read) and blocks(read)[1].q_lora_rank is None and blocks(read)[1].is_mla
