"""A torchtitan 0.3.0 job for a plan: a Python config-registry function.

torchtitan 0.3.0 (PyPI, 2026-09) configures a job with a Python config registry instead of TOML
files (``torchtitan/config/manager.py``: ``--module M --config FN`` imports ``M`` and calls ``FN()``
for a ``Trainer.Config``; ``--job.config_file`` is gone). The export is such a module: one function,
``meshplan_job``, that starts from torchtitan's own Llama 3.1 config (``llama3_8b`` / ``llama3_70b``
/ ``llama3_405b`` in ``torchtitan/models/llama3/config_registry.py``) or from ``Trainer.Config()``
for other models, and sets what the plan decides:

- ``config.parallelism`` (``torchtitan/config/configs.py::ParallelismConfig``): DP as replication
  (ZeRO-0) or FSDP2 sharding (ZeRO-3), TP with sequence parallelism, PP with the schedule,
  ``pipeline_parallel_microbatch_size`` and ``module_fqns_per_model_part`` (chunk k on pipeline rank
  k % pp, the "loop" mapping of ``distributed/pipeline_parallel.py``), CP and EP;
- ``config.activation_checkpoint``: ``FullAC.Config()``, ``SelectiveAC.Config()`` or ``None`` (the
  ``full`` / ``selective`` / ``none`` subcommands of ``ActivationCheckpointingConfig``);
- ``config.compile`` for a plan that compiles (``config.compile`` true): ``CompileConfig`` with
  ``enable``, the default ``components`` (model and loss) and ``enable_async_tensor_parallel`` when
  the plan overlaps TP communication (async TP; ``CompileConfig.__post_init__`` refuses it without
  the compiled model). Plans that do not compile keep torchtitan's default (eager);
- ``config.training``: ``local_batch_size``, ``global_batch_size``, ``seq_len``, bf16 parameters,
  ``mixed_precision_reduce = "float32"`` (the only value 0.3.0 accepts) and, with PP,
  ``disable_cuda_graphs = True`` (``Trainer.Config._validate_cuda_graphs`` refuses PP otherwise).

Module names are those of 0.3.0's ``Decoder``: ``tok_embeddings``, ``layers.<i>``, ``norm``,
``lm_head`` (0.2 called the head ``output``; a wrong name makes the pipeline split drop it).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer
from planner.plans.engines.common import Chunk, UnsupportedPlanError, check_decoder, chunks, comment, describe, uniform_recompute
from planner.plans.schema import Plan

TARGET = "torchtitan"
VERSION = "0.3.0"
"""The torchtitan release the export is written for (and tested against, tests/planner/outputs/export)."""
FUNCTION = "meshplan_job"
"""Name of the config-registry function (and, by convention, of the module file)."""
SCHEDULES = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "gpipe": "GPipe"}
"""Plan schedule -> PyTorch ``get_schedule_class`` name (``torch/distributed/pipelining/schedules.py``)."""
AC_POLICIES = {"none": "None", "full": "FullAC.Config()", "selective": "SelectiveAC.Config()"}
"""Recomputation -> ``config.activation_checkpoint`` (selective is 0.3.0's per-op SAC)."""
REGISTRY = {"llama3.1-8b": ("llama3_8b", "8B"), "llama3.1-70b": ("llama3_70b", "70B"), "llama3.1-405b": ("llama3_70b", "405B")}
"""Presets with a torchtitan config-registry function and the model flavor (``torchtitan.models.llama3``).
The job restates the model spec with the plan's GEMM precision; 405B starts from the 70B recipe,
because ``llama3_405b()`` builds Float8 layers, which refuse to build without an SM89+ GPU."""
FLOAT8 = 'converters=[Float8LinearConverter.Config(filter_fqns=["lm_head"])]'
"""The Float8 converter of torchtitan's own ``llama3_405b`` recipe, for plans in fp8."""


class TorchtitanExport(BaseModel):
    """The settings a plan decides, and the registry module that applies them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header: str
    base: str | None
    """torchtitan's registry function the job starts from (None: ``Trainer.Config()``, set the model)."""
    flavor: str | None
    """Llama 3 flavor of the model spec (with ``base``)."""
    precision: str
    """GEMM precision: ``bf16``, or ``fp8`` (torchao Float8 linear layers)."""
    parallelism: dict[str, Any]
    activation_checkpoint: str
    """``full``, ``selective`` or ``none``."""
    compile: dict[str, Any] | None
    """``CompileConfig`` arguments for a compiled plan (None: torchtitan's default, eager)."""
    training: dict[str, Any]
    nproc_per_node: int
    nnodes: int
    notes: list[str]

    def sections(self) -> dict[str, Any]:
        """``{"parallelism": ..., "activation_checkpoint": ..., "training": ...}`` and ``"compile"``
        for a compiled plan."""
        out: dict[str, Any] = {"parallelism": self.parallelism, "activation_checkpoint": self.activation_checkpoint}
        if self.compile is not None:
            out["compile"] = self.compile
        return out | {"training": self.training}

    def python(self) -> str:
        """The config-registry module: save as ``meshplan_job.py`` and run torchtitan with
        ``--module meshplan_job --config meshplan_job``."""
        head = [f"# torchtitan {VERSION} config registry for {comment(self.header)}"] + [f"# note: {comment(n)}" for n in self.notes]
        head += ["# Save as meshplan_job.py on PYTHONPATH and run on every node:",
                 f"#   torchrun --nproc_per_node {self.nproc_per_node} --nnodes {self.nnodes} --node_rank $NODE_RANK \\",
                 "#       --rdzv_endpoint $MASTER_ADDR:29500 -m torchtitan.train --module meshplan_job --config meshplan_job",
                 '"""meshplan plan as a torchtitan config-registry function."""', ""]
        imports = ["from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC", "from torchtitan.trainer import Trainer"]
        body = [f"def {FUNCTION}() -> Trainer.Config:",
                f"    config = {self.base}()" if self.base else "    config = Trainer.Config()  # set config.model_spec to your model"]
        if self.base:
            imports[1:1] = ["from torchtitan.models.llama3 import model_registry", f"from torchtitan.models.llama3.config_registry import {self.base}"]
            body.append(f'    config.model_spec = model_registry({json.dumps(self.flavor)}{", " + FLOAT8 if self.precision == "fp8" else ""})')
            body.append(f'    config.hf_assets_path = {json.dumps("./assets/hf/Llama-3.1-" + str(self.flavor))}')
            if self.precision == "fp8":
                imports.insert(0, "from torchtitan.components.quantization.float8 import Float8LinearConverter")
        body += [f"    config.parallelism.{k} = {v!r}" for k, v in self.parallelism.items()]
        body += [f"    config.activation_checkpoint = {AC_POLICIES[self.activation_checkpoint]}"]
        if self.compile is not None:
            imports.insert(0, "from torchtitan.config.configs import CompileConfig")
            body.append(f"    config.compile = CompileConfig({', '.join(f'{k}={v!r}' for k, v in self.compile.items())})")
        body += [f"    config.training.{k} = {v!r}" for k, v in self.training.items()]
        body += ["    return config"]
        return "\n".join(head + imports + ["", ""] + body) + "\n"


def torchtitan_export(plan: Plan, model: ModelSpec) -> TorchtitanExport:
    """torchtitan settings for ``plan``; raises :class:`UnsupportedPlanError` naming the field
    torchtitan cannot express."""
    check_decoder(model, TARGET, "torchtitan's decoder")
    parts = chunks(plan, model)
    mode = uniform_recompute(plan, TARGET, parts)
    base, flavor = REGISTRY.get(plan.model.arg.strip().lower(), (None, None)) if plan.model.spec is None else (None, None)
    notes = [] if base else [f"torchtitan has no config-registry function for {plan.model.name}: set config.model_spec "
                             "(tok_embeddings, layers, norm, lm_head), the tokenizer and the data"]
    notes.append("the data, tokenizer (hf_assets_path), optimizer and checkpointing stay those of the base config")
    if plan.config.grad_reduce_bytes == 2:
        notes.append("the plan assumed bf16 gradient reduction; torchtitan 0.3.0 reduces in float32 only")
    notes += _offload_notes(plan)
    m = plan.mesh
    return TorchtitanExport(
        header=describe(plan), base=base, flavor=flavor, precision=plan.config.precision, parallelism=_parallelism(plan, model, parts), activation_checkpoint=mode,
        compile=_compile(plan), training=_training(plan), nproc_per_node=min(plan.request.gpus, m.gpus_per_node), nnodes=m.nodes, notes=notes,
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
        "enable_sequence_parallel": m.tp > 1,
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
                row.append("lm_head")
            else:
                row.append(f"layers.{i - 1}")
        names.append(row)
    return names


def _offload_notes(plan: Plan) -> list[str]:
    """torchtitan offloads through FSDP2's ``CPUOffloadPolicy`` (``training.enable_cpu_offload``),
    which moves parameters and gradients with the optimizer states, under FSDP only; it has no
    activation offloading."""
    cfg = plan.config
    if cfg.offload_activations:
        raise UnsupportedPlanError(TARGET, "config.offload_activations", "torchtitan has no activation offloading (only FSDP2 CPU offload of parameters, gradients and optimizer states)")
    if not cfg.offload_optimizer:
        return []
    if plan.mesh.zero != 3:
        raise UnsupportedPlanError(TARGET, "config.offload_optimizer", f"zero {plan.mesh.zero}: torchtitan offloads through FSDP2 (zero 3) only")
    return ["enable_cpu_offload also moves parameters and gradients to the host (FSDP2 CPUOffloadPolicy): slower than the plan's optimizer-only offload"]


def _compile(plan: Plan) -> dict[str, Any] | None:
    """``CompileConfig`` arguments of a compiled plan: torch.compile on the model and the loss
    (torchtitan's default ``components``), with async TP where the plan overlaps TP communication
    (torchtitan/config/configs.py ``CompileConfig``); None where the plan runs eager."""
    cfg = plan.config
    if cfg.compile is not True:
        if cfg.tp_comm_overlap:
            raise UnsupportedPlanError(TARGET, "config.tp_comm_overlap", "torchtitan overlaps TP communication only as async TP, which needs torch.compile; re-plan with --compile")
        return None
    return {"enable": True, "components": ["model", "loss"], "enable_async_tensor_parallel": cfg.tp_comm_overlap}


def _training(plan: Plan) -> dict[str, Any]:
    """Batch in samples: with PP a device takes GBS/DP per step in micro-batches of
    ``pipeline_parallel_microbatch_size``; without PP, ``local_batch_size`` is the micro-batch and
    torchtitan accumulates GBS / (local x DP) steps. Both give ``num_microbatches`` exactly."""
    s, m, cfg = plan.schedule, plan.mesh, plan.config
    local = s.global_batch // m.dp if m.pp > 1 else s.micro_batch
    out: dict[str, Any] = {"local_batch_size": local, "global_batch_size": s.global_batch, "seq_len": cfg.seq_len,
                           "mixed_precision_param": "bfloat16" if cfg.param_bytes == 2 else "float32",
                           "mixed_precision_reduce": "float32"}
    if m.pp > 1:
        out["disable_cuda_graphs"] = True
    if cfg.offload_optimizer:
        out["enable_cpu_offload"] = True
    return out
