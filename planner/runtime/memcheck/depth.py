"""Measure a deep model from two shallow copies of it: exact when its blocks repeat.

A rank whose chunk is ``n`` identical transformer blocks (same spec, same recomputation) plus the
layers around them (embedding, final norm, head) holds, at every point of its step, memory that is
affine in ``n``: each block adds the same parameters, gradients, optimizer states and stored
activations, and the step's ops repeat block by block. So the tracker's peak at ``n`` blocks is
``P(a) + (n - a)(P(b) - P(a)) / (b - a)`` for two depths ``a < b`` taken past the edge effects.
Those are real: with two blocks the peak can fall in another phase of the step than with many (a
GPT-3 175B chunk peaks in backward at 2 blocks and at the start of backward from 3 on), so the
check measures three depths (:data:`DEPTHS`), extrapolates from the last two and accepts the result
only when the three lie on a line (:data:`AFFINE_TOLERANCE`); otherwise it measures at full depth.
``tests/planner/runtime/test_check_memory.py`` checks an extrapolation against a full-depth run.

Plans that do not have this shape (interleaved chunks, mixed per-layer recomputation, distinct
blocks, factory models whose depth cannot be changed) are measured at full depth.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from costmodel.specs import ModelSpec, TransformerLayer
from planner.plans.schema import Plan

DEPTHS = (3, 4, 5)
"""Blocks per chunk of the shallow copies: the line through the last two, checked by the first."""
AFFINE_TOLERANCE = 0.002
"""Largest second difference of the three shallow peaks, as a fraction of the deepest one."""


def _block_runs(plan: Plan, spec: ModelSpec) -> list[list[int]] | None:
    """Per stage, the indices of its blocks, if every stage's blocks are one run of identical,
    identically recomputed blocks with more than ``DEPTHS[-1]`` of them; else None."""
    if plan.schedule.virtual_stages != 1 or plan.model.trace:
        return None
    blocks = [i for i, layer in enumerate(spec.layers) if isinstance(layer, TransformerLayer)]
    if not blocks or len({spec.layers[i] for i in blocks}) != 1:
        return None
    runs = []
    for stage in plan.stages:
        idx = [pos for pos, layer in enumerate(stage.layers) if layer in set(blocks)]
        modes = {stage.layer_recompute[pos] for pos in idx}
        if len(idx) <= DEPTHS[-1] or len(modes) != 1 or idx != list(range(idx[0], idx[0] + len(idx))):
            return None
        runs.append([stage.layers[pos] for pos in idx])
    return runs


def can_extrapolate(plan: Plan, spec: ModelSpec) -> bool:
    """Whether every stage of ``plan`` is a run of repeated blocks deep enough to extrapolate."""
    return _block_runs(plan, spec) is not None


def shallow_plan(plan: Plan, spec: ModelSpec, depth: int) -> tuple[Plan, ModelSpec] | None:
    """``plan`` and its model with every stage cut to ``depth`` blocks, or None when the plan is not
    of the repeated shape (see the module docstring)."""
    runs = _block_runs(plan, spec)
    if runs is None:
        return None
    drop = {i for run in runs for i in run[depth:]}
    keep = [i for i in range(len(spec.layers)) if i not in drop]
    new_index = {old: new for new, old in enumerate(keep)}
    small = spec.model_copy(update={"layers": tuple(spec.layers[i] for i in keep)})
    stages = []
    for stage in plan.stages:
        pairs = [(new_index[i], mode) for i, mode in zip(stage.layers, stage.layer_recompute) if i not in drop]
        stages.append(stage.model_copy(update={"layers": [p[0] for p in pairs], "layer_recompute": [p[1] for p in pairs]}))
    per_layer = None
    if plan.config.layer_recompute is not None:
        per_layer = tuple(plan.config.layer_recompute[i] for i in keep)
    config = plan.config.model_copy(update={"stage_layers": tuple(len(s.layers) for s in stages), "layer_recompute": per_layer})
    from costmodel.params import count_params

    model = plan.model.model_copy(update={"num_layers": len(keep), "layer_names": [plan.model.layer_names[i] for i in keep],
                                          "params": count_params(small)})
    return plan.model_copy(update={"model": model, "stages": stages, "config": config}), small


def shallow_module(arg: str, small: ModelSpec, depth_blocks: int) -> nn.Module:
    """The module of ``arg`` at the shallow depth: a preset's spec as built by the runtime, or a
    Hugging Face ``config.json`` with fewer hidden layers, on ``meta``."""
    from planner.runtime.models import build_model

    if not str(arg).endswith(".json"):
        return build_model(small)
    import torch
    import transformers

    from planner.intake.trace.load import _hf_class

    from planner.intake.jsonio import read_json

    raw = read_json(arg, f"model config {arg}", "fix the file")
    raw["num_hidden_layers"] = len([x for x in small.layers if isinstance(x, TransformerLayer)])
    config = transformers.AutoConfig.for_model(**raw)
    config.use_cache = False
    with torch.device("meta"):
        return _hf_class(transformers, raw, config)._from_config(config, attn_implementation="sdpa")


def is_affine(shallow: list[dict[str, float]]) -> bool:
    """The peaks at the three :data:`DEPTHS` lie on a line (equally spaced depths)."""
    p0, p1, p2 = (x["total"] for x in shallow)
    return abs(p2 - 2 * p1 + p0) <= AFFINE_TOLERANCE * max(p2, 1.0)


def extrapolate(shallow: list[dict[str, float]], blocks: int) -> dict[str, float]:
    """Each figure at ``blocks`` blocks from its values at the last two :data:`DEPTHS`."""
    a, b = DEPTHS[-2:]
    low, high = shallow[-2:]
    return {k: low[k] + (blocks - a) * (high[k] - low[k]) / (b - a) for k in low}


def rank_blocks(plan: Plan, spec: ModelSpec, pp_rank: int) -> int:
    """Blocks in pipeline rank ``pp_rank``'s chunk (the depth to extrapolate to)."""
    runs = _block_runs(plan, spec)
    assert runs is not None
    return len(runs[pp_rank])


def describe(value: Any) -> str:
    """How a rank was measured, for the notes."""
    return f"extrapolated from {DEPTHS[-2]} and {DEPTHS[-1]} blocks per stage (affine through {DEPTHS[0]})" if value else "full depth"
