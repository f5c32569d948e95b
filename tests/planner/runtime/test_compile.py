"""``config.compile``: ``planner.apply`` compiles each transformer block on its own (torchtitan's
per-block ``torch.compile``), and dynamo captures them when a step runs.

One process, a one-rank gloo world, the tiny Llama's four blocks. The step compiles with dynamo's
``eager`` backend (``planner.runtime.compile.BACKEND`` patched): dynamo captures the same regions
as with Inductor, without the C++ build that takes minutes on a loaded two-core machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from plan_helpers import make_plan, write_llama_config


def test_compile_knob_compiles_every_block_once_and_dynamo_captures_them(one_rank_world: None, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters

    import planner.runtime.compile as compile_module
    from planner.runtime.apply import apply
    from planner.runtime.init import materialize, synthetic_tokens
    from planner.runtime.models import build_model

    monkeypatch.setattr(compile_module, "BACKEND", "eager")
    config = write_llama_config(tmp_path)
    eager = apply(make_plan(config, {}), build_model(config), device_type="cpu")
    assert eager.compiled == 0 and compile_module.compiled_blocks(eager.stages[0]) == 0
    runtime = apply(make_plan(config, {"compile": True}), build_model(config), device_type="cpu")
    stage = runtime.stages[0]
    blocks = [u for u in stage.units if u.kind == "block"]
    assert runtime.compiled == len(blocks) == compile_module.compiled_blocks(stage) == 4
    assert all(getattr(stage.layer(u), "_compiled_call_impl", None) is not None for u in blocks)
    names = {n for n, _ in runtime.named_parameters()}
    assert "model.layers.0.self_attn.q_proj.weight" in names  # compiled in place: the unsplit model's names
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    materialize(runtime, build_model(config, device="cpu"))
    loss = runtime.step(synthetic_tokens(0, 0, 8, 16, 128))
    assert loss == pytest.approx(4.85, abs=0.1)  # ln(128): untrained
    assert counters["stats"]["unique_graphs"] >= 1 and counters["frames"]["ok"] >= 1
    assert not counters["graph_break"], dict(counters["graph_break"])
