"""What every engine export shares: the refusal error, the model behind a plan, its chunks.

A plan is portable when it has one TP/CP/DP degree per job, a per-stage layer assignment and a
per-stage recomputation choice (ecosystem-notes B6, "consequences for the planner"). The exporters
read exactly that core; anything an engine cannot express is refused with
:class:`UnsupportedPlanError`, which names the plan field (CLI exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, TransformerLayer
from planner.errors import InputError
from planner.plans.schema import Plan

TARGETS = ("megatron", "torchtitan", "deepspeed")
"""Engines ``meshplan export --to`` writes for."""


class UnsupportedPlanError(InputError):
    """The plan uses something ``target`` cannot express; ``field`` is the plan field (exit 2)."""

    def __init__(self, target: str, field: str, reason: str) -> None:
        self.target = target
        self.field = field
        super().__init__(f"cannot export to {target}: {field}: {reason}")


def resolve_plan_model(plan: Plan, retrace: bool = False) -> ModelSpec:
    """The model a plan was made for: the plan's own layer list or its preset, never code the plan
    names (``planner.plans.named_model.plan_model``; ``retrace`` opts in to rebuilding a factory), checked
    against the plan's layer names."""
    from planner.plans.named_model import plan_model

    model = plan_model(plan, retrace)
    names = [x.name for x in model.layers]
    if names != plan.model.layer_names:
        raise InputError(
            f"model {plan.model.arg!r} now has {len(names)} layers, the plan {plan.model.num_layers} "
            "(or they are named differently); the model changed since planning: re-plan it"
        )
    return model


@dataclass(frozen=True)
class Chunk:
    """One model chunk (pipeline stage) in chunk order: chunk k is virtual chunk k // pp of
    pipeline rank k % pp (Megatron's layout rule, ecosystem-notes B1)."""

    index: int
    layers: tuple[int, ...]
    blocks: tuple[int, ...]
    """The transformer blocks among ``layers`` (model layer indices)."""
    block_recompute: tuple[str, ...]
    """Recomputation of each of ``blocks``, in order."""


def chunks(plan: Plan, model: ModelSpec) -> list[Chunk]:
    """The plan's stages as chunks, with their transformer blocks and those blocks' recomputation."""
    out = []
    for stage in sorted(plan.stages, key=lambda s: s.index):
        modes = dict(zip(stage.layers, stage.layer_recompute))
        blocks = tuple(i for i in stage.layers if isinstance(model.layers[i], TransformerLayer))
        out.append(Chunk(stage.index, tuple(stage.layers), blocks, tuple(modes[i] for i in blocks)))
    return out


def check_decoder(model: ModelSpec, target: str, builds: str) -> None:
    """Refuse a model that is not embedding, causal decoder blocks, final norm, output head (what
    the engines' GPT/Llama model builders make; ``builds`` names the builder in the message)."""
    n = len(model.layers)
    expected = [EmbeddingLayer] + [TransformerLayer] * (n - 3) + [NormLayer, HeadLayer]
    bad = next((i for i, x in enumerate(model.layers) if n < 4 or type(x) is not expected[i]), None)
    if bad is not None:
        raise UnsupportedPlanError(target, f"model.layers[{bad}]", f"{builds} builds embedding, decoder blocks, final norm and output head only")
    for i, layer in enumerate(model.layers[1:-2], start=1):
        assert isinstance(layer, TransformerLayer)
        if layer.cross_attention or not layer.causal:
            raise UnsupportedPlanError(target, f"model.layers[{i}]", f"{builds} builds causal decoder blocks without cross-attention")


def block_layers(model: ModelSpec) -> list[TransformerLayer]:
    """The model's transformer blocks in order."""
    return [x for x in model.layers if isinstance(x, TransformerLayer)]


def uniform_recompute(plan: Plan, target: str, parts: list[Chunk]) -> str:
    """The one recomputation mode every block shares; refuse a per-layer mix (torchtitan and
    DeepSpeed take one mode per job: ``activation_checkpoint.mode``, ``activation_checkpoint_interval``)."""
    seen = [m for c in parts for m in c.block_recompute]
    odd = next((c for c in parts if any(m != seen[0] for m in c.block_recompute)), None) if seen else None
    if odd is not None:
        modes = ", ".join(sorted(set(seen)))
        raise UnsupportedPlanError(
            target, f"stages[{odd.index}].layer_recompute",
            f"blocks mix recomputation modes ({modes}); {target} takes one mode for every block: re-plan with --target {target}",
        )
    return seen[0] if seen else "none"


def describe(plan: Plan) -> str:
    """One line naming the plan, for file headers."""
    m = plan.mesh
    return (f"{plan.model.name} on {plan.request.gpus} GPUs ({plan.cluster.name}): tp {m.tp} x pp {m.pp} x cp {m.cp} "
            f"x dp {m.dp}, ep {m.ep}, zero {m.zero}, {plan.schedule.name}, micro-batch {plan.schedule.micro_batch}, "
            f"{plan.schedule.num_microbatches} micro-batches")


def comment(text: str) -> str:
    """``text`` safe in a ``#`` comment line of bash, Python or TOML: every character that is not
    printable (line breaks above all, which would end the comment and start code) is written as its
    backslash escape. Plans with such text are refused by the validator already; this is the
    exporter's own guard, for plans built in memory."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
