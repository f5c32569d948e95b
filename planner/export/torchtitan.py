"""A torchtitan job configuration (TOML) for a plan.

Names are the TOML job config of pytorch/torchtitan up to #2386 (2026-02-23; ``torchtitan/config/
job_config.py`` at e347b1e5, ecosystem-notes B3 and B6): ``[parallelism]`` degrees with explicit
``module_fqns_per_model_part`` (chunk k on pipeline rank k % pp, torchtitan's "loop" stage mapping),
``[activation_checkpoint] mode``, and ``[training]`` in samples (``local_batch_size`` per device,
``global_batch_size``, ``seq_len``). Module names are those torchtitan's Llama builds:
``tok_embeddings``, ``layers.<i>``, ``norm``, ``output``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer
from planner.export import toml
from planner.export.common import Chunk, UnsupportedPlanError, check_decoder, chunks, describe, uniform_recompute
from planner.schema import Plan

TARGET = "torchtitan"
SCHEDULES = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "gpipe": "GPipe"}
"""Plan schedule -> PyTorch ``get_schedule_class`` name (``torch/distributed/pipelining/schedules.py``)."""
AC_MODES = {"none": {"mode": "none"}, "full": {"mode": "full"}, "selective": {"mode": "selective", "selective_ac_option": "op"}}
"""Recomputation -> ``[activation_checkpoint]``; selective is per-op SAC (``selective_ac_option = "op"``)."""


class TorchtitanExport(BaseModel):
    """The three job-config sections a plan decides."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header: str
    parallelism: dict[str, Any]
    activation_checkpoint: dict[str, Any]
    training: dict[str, Any]
    notes: list[str]

    def sections(self) -> dict[str, dict[str, Any]]:
        """``{"parallelism": ..., "activation_checkpoint": ..., "training": ...}``."""
        return {"parallelism": self.parallelism, "activation_checkpoint": self.activation_checkpoint, "training": self.training}

    def toml(self) -> str:
        """The sections as TOML, to merge into a torchtitan train config (``--job.config_file``)."""
        header = [f"torchtitan job config for {self.header}"] + [f"note: {n}" for n in self.notes]
        return toml.dumps(self.sections(), header)


def torchtitan_export(plan: Plan, model: ModelSpec) -> TorchtitanExport:
    """torchtitan sections for ``plan``; raises :class:`UnsupportedPlanError` naming the field
    torchtitan cannot express."""
    check_decoder(model, TARGET, "torchtitan's Llama")
    parts = chunks(plan, model)
    mode = uniform_recompute(plan, TARGET, parts)
    notes = ["[model] name/flavor, [job], [optimizer] and the data settings stay yours to set"]
    return TorchtitanExport(
        header=describe(plan),
        parallelism=_parallelism(plan, model, parts),
        activation_checkpoint=dict(AC_MODES[mode]),
        training=_training(plan),
        notes=notes,
    )


def _parallelism(plan: Plan, model: ModelSpec, parts: list[Chunk]) -> dict[str, Any]:
    """Degrees: DP as plain replication (ZeRO-0) or FSDP2 sharding (ZeRO-3); EP carved out of
    dp_shard x cp; TP always with sequence parallelism (torchtitan's ``parallelize`` applies it)."""
    m = plan.mesh
    if m.zero not in (0, 3):
        raise UnsupportedPlanError(TARGET, "mesh.zero", f"zero {m.zero}: torchtitan shards with FSDP2 (zero 3) or replicates (zero 0); re-plan with --target torchtitan")
    if m.tp > 1 and not m.sp:
        raise UnsupportedPlanError(TARGET, "mesh.sp", "torchtitan always uses sequence parallelism with tensor parallelism")
    shard = m.dp if m.zero == 3 else 1
    if (shard * m.cp) % m.ep:
        raise UnsupportedPlanError(TARGET, "mesh.ep", f"ep {m.ep} must divide data_parallel_shard_degree {shard} x context_parallel_degree {m.cp} in torchtitan")
    out: dict[str, Any] = {
        "data_parallel_replicate_degree": m.dp if m.zero == 0 else 1,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": m.tp,
        "pipeline_parallel_degree": m.pp,
        "context_parallel_degree": m.cp,
        "expert_parallel_degree": m.ep,
    }
    if m.pp > 1:
        name = plan.schedule.name
        if name not in SCHEDULES:
            raise UnsupportedPlanError(TARGET, "schedule.name", f"{name!r} has no PyTorch pipelining schedule of that name; re-plan with --target torchtitan")
        out["pipeline_parallel_schedule"] = SCHEDULES[name]
        out["pipeline_parallel_microbatch_size"] = plan.schedule.micro_batch
        out["module_fqns_per_model_part"] = module_fqns(model, parts)
    return out


def module_fqns(model: ModelSpec, parts: list[Chunk]) -> list[list[str]]:
    """Module names of every chunk, in chunk order (``layers.<i>`` counts decoder blocks from 0:
    model layer i >= 1 is block i - 1, as :func:`check_decoder` has ensured)."""
    names = []
    for c in parts:
        row = []
        for i in c.layers:
            layer = model.layers[i]
            if isinstance(layer, EmbeddingLayer):
                row.append("tok_embeddings")
            elif isinstance(layer, NormLayer):
                row.append("norm")
            elif isinstance(layer, HeadLayer):
                row.append("output")
            else:
                row.append(f"layers.{i - 1}")
        names.append(row)
    return names


def _training(plan: Plan) -> dict[str, Any]:
    """Batch in samples: with PP a device takes GBS/DP per step in micro-batches of
    ``pipeline_parallel_microbatch_size``; without PP, ``local_batch_size`` is the micro-batch and
    torchtitan accumulates GBS / (local x DP) steps. Both give ``num_microbatches`` exactly."""
    s, m, cfg = plan.schedule, plan.mesh, plan.config
    local = s.global_batch // m.dp if m.pp > 1 else s.micro_batch
    out: dict[str, Any] = {"local_batch_size": local, "global_batch_size": s.global_batch, "seq_len": cfg.seq_len}
    if cfg.param_bytes == 2:
        out["mixed_precision_param"] = "bfloat16"
    out["mixed_precision_reduce"] = "float32" if cfg.grad_reduce_bytes == 4 else "bfloat16"
    return out
