"""A DeepSpeed config JSON for a plan, with the settings DeepSpeed takes in code.

Keys are DeepSpeed 0.19.8's (PyPI, 2026-10; ``deepspeed/runtime/config.py`` reads them, and the tests
feed every export to its ``DeepSpeedConfig``; ``docs/_pages/config-json.md``, ecosystem-notes B2, B6): the batch identity ``train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel size`` with concrete integers, ``zero_optimization.stage``
(at most 1 with pipeline parallelism: ``runtime/pipe/engine.py`` asserts it), ``bf16``,
``activation_checkpointing``. The pipeline degree, stage partition and which layers are checkpointed
are ``PipelineModule`` arguments (``num_stages``, ``partition_method`` — only ``uniform``,
``parameters`` or ``type:<regex>``, no explicit bounds — and ``activation_checkpoint_interval``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from costmodel.specs import ModelSpec, TransformerLayer
from planner.plans.engines.common import Chunk, UnsupportedPlanError, block_layers, chunks, comment, describe, uniform_recompute
from planner.plans.schema import Plan

TARGET = "deepspeed"
VERSION = "0.19.8"
"""The DeepSpeed release the export is written for (and tested against)."""
BLOCK_PATTERN = "transformer"
"""``partition_method="type:transformer"``: DeepSpeed matches it case-insensitively against each
layer's class name (``PipelineModule._find_layer_type``), as Megatron-DeepSpeed's
``ParallelTransformerLayerPipe`` blocks do."""


class DeepSpeedExport(BaseModel):
    """The config JSON and the code-side settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header: str
    config: dict[str, Any]
    """What ``deepspeed.initialize(config=...)`` reads."""
    code: dict[str, Any]
    """``PipelineModule`` arguments (``pipeline_module``, None without pipelining), the topology, the
    layer order the partition assumes, and MoE ``ep_size``."""
    notes: list[str]

    def json(self) -> str:
        """The config as JSON text."""
        return json.dumps(self.config, indent=2) + "\n"

    def python(self) -> str:
        """The code-side settings as a Python fragment."""
        lines = [f"# DeepSpeed code-side settings for {comment(self.header)}"] + [f"# note: {comment(n)}" for n in self.notes] + ["import deepspeed"]
        pm = self.code["pipeline_module"]
        if pm is not None:
            lines += ["from deepspeed.pipe import PipelineModule"]
            topo = self.code["topology"]
            if topo is not None:
                lines += ["from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology",
                          f"topology = PipeModelDataParallelTopology(num_pp={topo['num_pp']}, num_mp={topo['num_mp']}, num_dp={topo['num_dp']})"]
            stages = "topology=topology" if topo is not None else f"num_stages={pm['num_stages']}"
            lines += [f"# layers: one LayerSpec per plan layer, in order ({comment(self.code['layer_order'])})",
                      f"model = PipelineModule(layers=layers, {stages}, partition_method={pm['partition_method']!r}, "
                      f"activation_checkpoint_interval={pm['activation_checkpoint_interval']})"]
        elif self.code["checkpoint_every_block"]:
            lines += ["# wrap every transformer block's forward in deepspeed.checkpointing.checkpoint (or HF gradient_checkpointing_enable())"]
        if self.code["moe"] is not None:
            moe = self.code["moe"]
            lines += [f"# MoE blocks: deepspeed.moe.layer.MoE(..., num_experts={moe['num_experts']}, ep_size={moe['ep_size']}, k={moe['k']})"]
        lines += ["engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=\"ds_config.json\")"]
        return "\n".join(lines) + "\n"


def deepspeed_export(plan: Plan, model: ModelSpec) -> DeepSpeedExport:
    """DeepSpeed config and code-side settings for ``plan``; raises :class:`UnsupportedPlanError`
    naming the field DeepSpeed cannot express."""
    m, s = plan.mesh, plan.schedule
    _check_mesh(plan)
    parts = chunks(plan, model)
    mode = uniform_recompute(plan, TARGET, parts)
    _check_offload(plan, mode)
    if mode == "selective":
        raise UnsupportedPlanError(TARGET, "config.recompute", "selective recomputation: DeepSpeed checkpoints whole layers (activation_checkpoint_interval); re-plan with --target deepspeed")
    if s.micro_batch * s.num_microbatches * m.dp != s.global_batch:
        raise UnsupportedPlanError(TARGET, "schedule.num_microbatches", f"micro-batch {s.micro_batch} x {s.num_microbatches} x dp {m.dp} != global batch {s.global_batch}")
    partition = _partition(plan, model, parts) if m.pp > 1 else None
    interval = 1 if mode == "full" else 0
    config = _config(plan, partition, interval)
    blocks = block_layers(model)
    moe = next((b for b in blocks if b.is_moe), None)
    if moe is not None and m.zero == 3:
        raise UnsupportedPlanError(TARGET, "mesh.zero", "zero 3 with mixture-of-experts: DeepSpeed's engine refuses native MoE layers under ZeRO-3 "
                                   "(runtime/engine.py, _validate_zero3_moe_compatibility); re-plan with --target deepspeed or zero <= 2")
    code = {
        "pipeline_module": None if partition is None else {"num_stages": m.pp, "partition_method": partition, "activation_checkpoint_interval": interval},
        "topology": {"num_pp": m.pp, "num_mp": m.tp, "num_dp": m.dp} if m.pp > 1 and m.tp > 1 else None,
        "layer_order": ", ".join(_runs(plan.model.layer_names)),
        "checkpoint_every_block": partition is None and mode == "full",
        "moe": None if moe is None else {"num_experts": moe.num_experts, "ep_size": m.ep, "k": moe.moe_top_k},
    }
    notes = []
    if m.pp > 1 and m.tp > 1:
        notes.append("tensor parallelism inside the pipeline comes from the model code (Megatron-DeepSpeed's mpu)")
    return DeepSpeedExport(header=describe(plan), config=config, code=code, notes=notes)


def _check_offload(plan: Plan, mode: str) -> None:
    """FP8 and what DeepSpeed can offload: its config has no FP8 GEMM switch (FP8 comes from
    Transformer Engine layers in the model code); ``offload_optimizer`` works with ZeRO 1-3;
    activations go to the host only as the checkpoints of full recomputation
    (``activation_checkpointing.cpu_checkpointing``)."""
    cfg = plan.config
    if cfg.precision == "fp8":
        raise UnsupportedPlanError(TARGET, "config.precision", "fp8: DeepSpeed's config has no FP8 GEMM setting (FP8 needs Transformer Engine layers in the model); re-plan with --precision bf16")
    if cfg.offload_optimizer and plan.mesh.zero == 0:
        raise UnsupportedPlanError(TARGET, "config.offload_optimizer", "zero 0: DeepSpeed offloads the optimizer with ZeRO stages 1-3 only (zero_optimization.offload_optimizer)")
    if cfg.offload_activations and mode != "full":
        raise UnsupportedPlanError(TARGET, "config.offload_activations", "without full recomputation: DeepSpeed moves only activation checkpoints to the host (cpu_checkpointing)")


def _check_mesh(plan: Plan) -> None:
    """What DeepSpeed's config and pipeline engine cannot take."""
    m, s = plan.mesh, plan.schedule
    if m.cp > 1:
        raise UnsupportedPlanError(TARGET, "mesh.cp", f"cp {m.cp}: DeepSpeed has no context parallelism key (Ulysses comes from the mpu); re-plan with --target deepspeed")
    if m.pp > 1 and m.zero >= 2:
        raise UnsupportedPlanError(TARGET, "mesh.zero", f"zero {m.zero} with pipeline parallelism (pp {m.pp}): DeepSpeed's pipeline engine allows ZeRO stage 0 or 1 only; re-plan with --target deepspeed")
    if m.sp and m.tp > 1:
        raise UnsupportedPlanError(TARGET, "mesh.sp", "Megatron-style sequence parallelism has no DeepSpeed config key; re-plan with --target deepspeed")
    if s.name != "1f1b" or s.virtual_stages > 1:
        raise UnsupportedPlanError(TARGET, "schedule.name", f"{s.name!r} with {s.virtual_stages} virtual stages: DeepSpeed's pipeline runs its own 1F1B schedule, one stage per rank")


def _config(plan: Plan, partition: str | None, interval: int) -> dict[str, Any]:
    m, s, cfg = plan.mesh, plan.schedule, plan.config
    zero: dict[str, Any] = {"stage": m.zero}
    if m.zero >= 1:
        zero["overlap_comm"] = cfg.overlap_grad_reduce
    if m.zero == 3 and cfg.zero3_bucket_params:
        zero["stage3_prefetch_bucket_size"] = cfg.zero3_bucket_params
    if cfg.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {
        "train_batch_size": s.global_batch,
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.num_microbatches,
        "bf16": {"enabled": cfg.param_bytes == 2},
        "communication_data_type": "fp32" if cfg.grad_reduce_bytes == 4 else "bf16",
        "zero_optimization": zero,
    }
    if m.tp > 1 and m.pp == 1:
        config["tensor_parallel"] = {"autotp_size": m.tp}
    if interval:
        config["activation_checkpointing"] = {"partition_activations": cfg.offload_activations, "cpu_checkpointing": cfg.offload_activations,
                                              "contiguous_memory_optimization": False, "synchronize_checkpoint_boundary": False,
                                              "profile": False}
    if partition is not None:
        config["pipeline"] = {"stages": m.pp, "partition": partition, "activation_checkpoint_interval": interval}
    return config


def partition_uniform(num_items: int, num_parts: int) -> list[int]:
    """DeepSpeed's ``runtime/utils.py::partition_uniform`` (part boundaries): equal parts, the first
    ``num_items % num_parts`` one item larger."""
    if num_items <= num_parts:
        return [min(p, num_items) for p in range(num_parts + 1)]
    chunk, residual = divmod(num_items, num_parts)
    return [p * chunk + min(p, residual) for p in range(num_parts + 1)]


def _partition(plan: Plan, model: ModelSpec, parts: list[Chunk]) -> str:
    """``uniform`` when DeepSpeed's uniform split of all layers is the plan's; ``type:transformer``
    when every stage has the same number of blocks and the other layers sit before the first block or
    after the last (the balanced split of 0/1 weights, ``partition_balanced``, is then unique: leading
    layers join the first stage, trailing ones the last); otherwise refused."""
    bounds = [0]
    for c in parts:
        bounds.append(bounds[-1] + len(c.layers))
    if bounds == partition_uniform(len(model.layers), len(parts)):
        return "uniform"
    counts = {len(c.blocks) for c in parts}
    block_idx = [i for i, x in enumerate(model.layers) if isinstance(x, TransformerLayer)]
    others_at_ends = bool(block_idx) and block_idx == list(range(block_idx[0], block_idx[-1] + 1))
    if len(counts) == 1 and counts != {0} and others_at_ends:
        return f"type:{BLOCK_PATTERN}"
    sizes = [len(c.layers) for c in parts]
    raise UnsupportedPlanError(TARGET, "stages[].layers", f"stage sizes {sizes} are neither DeepSpeed's uniform split nor an equal number of blocks per stage; re-plan with --target deepspeed")


def _runs(names: list[str]) -> list[str]:
    """``["embedding", "block", "block", "output"]`` as ``["embedding", "2 x block", "output"]``."""
    out: list[list[Any]] = []
    for name in names:
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return [f"{n} x {name}" if n > 1 else name for name, n in out]
