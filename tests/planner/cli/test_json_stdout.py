"""``--json`` stdout is exactly one JSON object, even when the ILP solver prints its banner (C level,
file descriptor 1) or a model factory prints: a real process, as a pipe to ``json.load`` sees it."""

from __future__ import annotations

import json
from pathlib import Path

QWEN2_MOE = {  # dense and MoE blocks alternate (decoder_sparse_step 2): the per-rank ILP runs
    "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16,
    "num_hidden_layers": 24, "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 2,
    "max_position_embeddings": 8192, "tie_word_embeddings": False,
}


def test_plan_json_of_alternating_dense_and_moe_blocks_is_one_object(meshplan, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(QWEN2_MOE))
    proc = meshplan("plan", "--model", str(config), "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64", "--seq-len", "4096", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)  # raises on a banner or a second object
    kinds = [layer.get("num_experts", 0) > 0 for layer in plan["model"]["spec"]["layers"] if layer["kind"] == "transformer"]
    assert kinds[:4] == [False, True, False, True]
    assert "ilp" in plan["search"]["solver"]
