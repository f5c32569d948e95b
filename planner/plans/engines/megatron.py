"""Megatron-LM ``pretrain_gpt.py`` arguments for a plan.

Flag names and rules are Megatron-LM's (NVIDIA/Megatron-LM@d98e8a64, ecosystem-notes B1 and B6; the
arguments are read by Megatron-LM's own ``parse_args`` / ``validate_args`` and megatron-core 0.16.1's
``TransformerConfig`` and ``PipelineParallelLayerLayout`` in the tests, tests/planner/outputs/export):
parallel sizes from ``ModelParallelConfig``, DP derived as world / (TP x PP x CP), at most one of
``--num-virtual-stages-per-pipeline-rank`` and ``--pipeline-model-parallel-layout`` (stage i = a·PP + b
is virtual chunk a of pipeline rank b), ``--recompute-method block`` recomputing the first N layers of
every model chunk, ZeRO-1 as ``--use-distributed-optimizer`` and ZeRO-2/3 as Megatron FSDP's
``optim_grads`` / ``optim_grads_params`` sharding. Arguments come grouped like the arrays of
``examples/gpt3/train_gpt3_175b_distributed.sh``.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict

from costmodel.specs import EmbeddingLayer, ModelSpec, TransformerLayer
from planner.plans.engines.common import Chunk, UnsupportedPlanError, block_layers, check_decoder, chunks, comment, describe
from planner.plans.schema import Plan

TARGET = "megatron"
VERSION = "megatron-core 0.16.1"
"""The Megatron release whose configuration classes check the export (tests/planner/outputs/export)."""
GROUPS = ("GPT_MODEL_ARGS", "TRAINING_ARGS", "MODEL_PARALLEL_ARGS")
"""Argument arrays, in the order ``torchrun ... pretrain_gpt.py`` receives them."""
FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}
"""``--data-parallel-sharding-strategy`` for ZeRO-2 and ZeRO-3 (ecosystem-notes B6)."""


class MegatronExport(BaseModel):
    """The arguments of one Megatron-LM launch, grouped, with the launcher's settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header: str
    groups: dict[str, list[str]]
    """``GPT_MODEL_ARGS``, ``TRAINING_ARGS``, ``MODEL_PARALLEL_ARGS``: argv tokens."""
    nproc_per_node: int
    nnodes: int
    env: dict[str, str]
    """Environment the launch needs (``CUDA_DEVICE_MAX_CONNECTIONS``)."""
    notes: list[str]
    """What the arguments leave to the user (tokenizer, data) or could not say exactly."""

    def argv(self) -> list[str]:
        """Every argument in group order: what follows ``pretrain_gpt.py``."""
        return [token for name in GROUPS for token in self.groups[name]]

    def shell(self) -> str:
        """A bash launcher: the argument arrays and the ``torchrun`` line (extra arguments such as
        data and tokenizer flags pass through ``"$@"``)."""
        lines = ["#!/usr/bin/env bash", f"# Megatron-LM launch for {comment(self.header)}"]
        lines += [f"# note: {comment(n)}" for n in self.notes]
        lines += ["# Run on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set; pass data and tokenizer",
                  "# arguments after the script name: ./launch.sh --data-path ... --tokenizer-type ...",
                  "set -euo pipefail"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.env.items()]
        lines += ["", "DISTRIBUTED_ARGS=(", f"    --nproc_per_node {self.nproc_per_node}", f"    --nnodes {self.nnodes}",
                  '    --node_rank "${NODE_RANK:-0}"', '    --master_addr "${MASTER_ADDR:-localhost}"',
                  '    --master_port "${MASTER_PORT:-6000}"', ")"]
        for name in GROUPS:
            lines += ["", f"{name}=("] + [f"    {line}" for line in _pairs(self.groups[name])] + [")"]
        lines += ["", 'torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \\',
                  '    "${GPT_MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${MODEL_PARALLEL_ARGS[@]}" "$@"', ""]
        return "\n".join(lines)


def _pairs(tokens: list[str]) -> list[str]:
    """One flag per line, with its value (shell-quoted) on the same line."""
    out: list[str] = []
    for token in tokens:
        if token.startswith("--") or not out:
            out.append(shlex.quote(token))
        else:
            out[-1] += " " + shlex.quote(token)
    return out


def megatron_export(plan: Plan, model: ModelSpec) -> MegatronExport:
    """Megatron-LM arguments for ``plan`` (whose model is ``model``); raises
    :class:`UnsupportedPlanError` naming the plan field Megatron-LM cannot express."""
    check_model(model)
    if plan.schedule.name not in ("1f1b", "interleaved-1f1b"):
        raise UnsupportedPlanError(TARGET, "schedule.name", f"{plan.schedule.name!r}: Megatron-LM runs 1F1B or interleaved 1F1B; re-plan with --target megatron")
    parts = chunks(plan, model)
    notes: list[str] = []
    groups = {
        "GPT_MODEL_ARGS": _model_args(plan, model, notes),
        "TRAINING_ARGS": _training_args(plan, parts),
        "MODEL_PARALLEL_ARGS": _parallel_args(plan, model, parts),
    }
    m = plan.mesh
    fsdp = m.zero >= 2
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if (m.tp > 1 or m.cp > 1) and not fsdp else {}
    notes.append("tokenizer, vocabulary and data: pass --tokenizer-type/--data-path (or --mock-data) yourself")
    return MegatronExport(header=describe(plan), groups=groups, nproc_per_node=min(plan.request.gpus, m.gpus_per_node),
                          nnodes=m.nodes, env=env, notes=notes)


def check_model(model: ModelSpec) -> None:
    """pretrain_gpt.py builds embedding, causal decoder blocks, final norm, output head; the blocks
    share one attention shape and MLP kind."""
    check_decoder(model, TARGET, "pretrain_gpt.py")
    first = model.layers[1]
    assert isinstance(first, TransformerLayer)
    for i, layer in enumerate(model.layers[1:-2], start=1):
        assert isinstance(layer, TransformerLayer)
        for field in ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_act", "norm", "kv_lora_rank",
                      "q_lora_rank", "v_head_dim", "qk_norm"):
            if getattr(layer, field) != getattr(first, field):
                raise UnsupportedPlanError(TARGET, f"model.layers[{i}].{field}", "Megatron-LM takes one value for every block")


def _model_args(plan: Plan, model: ModelSpec, notes: list[str]) -> list[str]:
    """The architecture as the cost model saw it (``TransformerConfig`` field names as flags)."""
    blocks = block_layers(model)
    b = blocks[0]
    dense = [x for x in blocks if not x.is_moe]
    args = ["--num-layers", str(len(blocks)), "--hidden-size", str(b.hidden_size),
            "--ffn-hidden-size", str((dense or blocks)[0].ffn_hidden_size), "--num-attention-heads", str(b.num_heads)]
    if b.num_kv_heads != b.num_heads:
        args += ["--group-query-attention", "--num-query-groups", str(b.num_kv_heads)]
    if b.is_mla:  # megatron/training/arguments.py: MLA flags (TransformerConfig's MLATransformerConfig)
        args += ["--multi-latent-attention", "--kv-lora-rank", str(b.kv_lora_rank), "--qk-head-dim", str(b.qk_nope_head_dim),
                 "--qk-pos-emb-head-dim", str(b.qk_rope_head_dim), "--v-head-dim", str(b.v_head_dim)]
        args += ["--q-lora-rank", str(b.q_lora_rank)] if b.q_lora_rank else []
    elif b.head_dim * b.num_heads != b.hidden_size:
        args += ["--kv-channels", str(b.head_dim)]
    if b.qk_norm:
        args.append("--qk-layernorm")
    args += _position_args(plan, model, notes)
    if b.ffn_act == "swiglu":
        args.append("--swiglu")
    elif b.ffn_act == "gelu_tanh":
        args.append("--openai-gelu")
    elif b.ffn_act in ("relu", "relu2"):
        notes.append("the MLP uses ReLU; Megatron-LM's default is GeLU: set the activation yourself")
    args += ["--normalization", "RMSNorm" if b.norm == "rmsnorm" else "LayerNorm"]
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    args += _bias_args(b, notes)
    args += _moe_args(blocks)
    windows = sorted({x.sliding_window for x in blocks if x.sliding_window})
    if windows:
        notes.append(f"sliding-window attention ({', '.join(map(str, windows))} tokens) is not emitted: set Megatron-LM's window option yourself")
    chunks = sorted({x.attention_chunk for x in blocks if x.attention_chunk})
    if chunks:
        notes.append(f"chunked attention ({', '.join(map(str, chunks))}-token chunks) is not emitted: set it up yourself")
    emb = model.layers[0]
    if isinstance(emb, EmbeddingLayer) and emb.norm:
        notes.append("the embedding has its own norm, which pretrain_gpt.py does not build")
    return args


def _position_args(plan: Plan, model: ModelSpec, notes: list[str]) -> list[str]:
    """Sequence length and positions: a learned table keeps its rows; otherwise rotary (Megatron-LM
    asserts ``--max-position-embeddings >= --seq-length``)."""
    seq = plan.config.seq_len
    emb = model.layers[0]
    learned = emb.max_positions if isinstance(emb, EmbeddingLayer) else 0
    if learned:
        return ["--seq-length", str(seq), "--max-position-embeddings", str(learned), "--position-embedding-type", "learned_absolute"]
    notes.append("positions: no learned table in the model, emitted as rope; add --rotary-base / rope scaling for your model "
                 "(Megatron-LM has no ALiBi: change it for ALiBi models)")
    return ["--seq-length", str(seq), "--max-position-embeddings", str(max(seq, model.max_seq_len)), "--position-embedding-type", "rope"]


def _bias_args(b: TransformerLayer, notes: list[str]) -> list[str]:
    """Megatron-LM adds biases to every linear layer unless ``--disable-bias-linear``; QKV alone
    takes ``--add-qkv-bias``."""
    if b.qkv_bias and b.out_bias and b.mlp_bias:
        return []
    if not (b.out_bias or b.mlp_bias):
        return ["--disable-bias-linear"] + (["--add-qkv-bias"] if b.qkv_bias else [])
    notes.append("biases on some projections only: check Megatron-LM's bias flags")
    return []


def _moe_args(blocks: list[TransformerLayer]) -> list[str]:
    """Mixture-of-experts shape; ``--moe-layer-freq`` as a Python list expression when dense and
    MoE blocks mix (ecosystem-notes B1)."""
    moe = [x for x in blocks if x.is_moe]
    if not moe:
        return []
    e = moe[0]
    args = ["--num-experts", str(e.num_experts), "--moe-router-topk", str(e.moe_top_k), "--moe-ffn-hidden-size", str(e.ffn_hidden_size)]
    if e.shared_expert_ffn_hidden_size:
        args += ["--moe-shared-expert-intermediate-size", str(e.shared_expert_ffn_hidden_size)]
    if len(moe) < len(blocks):
        args += ["--moe-layer-freq", _run_length([1 if x.is_moe else 0 for x in blocks])]
    return args


def _run_length(values: list[int]) -> str:
    """``[0,0,1,1,1]`` as ``([0]*2+[1]*3)``."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return "(" + "+".join(f"[{v}]*{n}" if n > 1 else f"[{v}]" for v, n in runs) + ")"


def _training_args(plan: Plan, parts: list[Chunk]) -> list[str]:
    """Batch (num_microbatches = GBS / (MBS x DP)), precision and recomputation."""
    cfg = plan.config
    args = ["--micro-batch-size", str(plan.schedule.micro_batch), "--global-batch-size", str(plan.schedule.global_batch)]
    if cfg.param_bytes == 2:
        args.append("--bf16")
    if cfg.grad_reduce_bytes == 2:
        args.append("--grad-reduce-in-bf16")
    return args + precision_args(plan) + offload_args(plan, parts) + recompute_args(parts)


def precision_args(plan: Plan) -> list[str]:
    """FP8 as the cost model runs it (``costmodel.precision``): Transformer Engine's hybrid format
    (E4M3 forward, E5M2 gradients; ``--fp8-format`` fills ``TransformerConfig.fp8``) with delayed
    scaling, or MXFP8 block scaling where the GPU has it (``--fp8-recipe``, ``TransformerConfig.fp8_recipe``)."""
    if plan.config.precision != "fp8":
        return []
    return ["--fp8-format", "hybrid", "--fp8-recipe", "mxfp8" if plan.cluster.gpu.mxfp8 else "delayed"]


def offload_args(plan: Plan, parts: list[Chunk]) -> list[str]:
    """Host offload: the distributed optimizer's CPU offload (``--optimizer-cpu-offload``,
    ``OptimizerConfig.optimizer_cpu_offload``; it needs ``--use-distributed-optimizer`` and
    ``--use-precision-aware-optimizer``, whose code path the hybrid device optimizer reuses:
    megatron/training/arguments.py ``validate_args``) and activation offloading
    (``--cpu-offloading-num-layers``, which sets ``TransformerConfig.cpu_offloading`` in
    ``validate_args``; Megatron-LM has no ``--cpu-offloading`` flag: every layer but the last, the most
    ``cpu_offloading_num_layers`` allows; not with pipeline parallelism or recomputation, which
    ``TransformerConfig`` refuses)."""
    cfg, m = plan.config, plan.mesh
    args: list[str] = []
    if cfg.offload_optimizer:
        if m.zero != 1:
            raise UnsupportedPlanError(TARGET, "config.offload_optimizer", f"zero {m.zero}: Megatron-LM offloads the optimizer of its distributed optimizer only (zero 1)")
        args += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
    if cfg.offload_activations:
        if m.pp > 1:
            raise UnsupportedPlanError(TARGET, "config.offload_activations", f"pp {m.pp}: Megatron-LM's activation offloading does not support pipeline parallelism")
        if any(mode != "none" for c in parts for mode in c.block_recompute):
            raise UnsupportedPlanError(TARGET, "config.offload_activations", "with recomputation: Megatron-LM's activation offloading refuses recomputed layers")
        blocks = sum(len(c.blocks) for c in parts)
        args += ["--cpu-offloading-num-layers", str(max(1, blocks - 1))]
    return args


def recompute_args(parts: list[Chunk]) -> list[str]:
    """Megatron-LM's recomputation for the plan's per-block modes: selective everywhere (core
    attention), full everywhere (``uniform``, one layer per checkpoint), or full on the first N blocks
    of every chunk (``block``; a chunk with fewer blocks recomputes all of them)."""
    modes = {m for c in parts for m in c.block_recompute}
    if modes <= {"none"}:
        return []
    if modes == {"selective"}:
        return ["--recompute-granularity", "selective", "--recompute-modules", "core_attn"]
    if modes == {"full"}:
        return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if modes == {"full", "none"}:
        n = _block_count(parts)
        return ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", str(n)]
    where = next(c.index for c in parts if "selective" in c.block_recompute)
    raise UnsupportedPlanError(TARGET, f"stages[{where}].layer_recompute", "selective and full recomputation mixed; Megatron-LM takes one granularity per job")


def _block_count(parts: list[Chunk]) -> int:
    """The N of ``--recompute-method block``: every chunk recomputes exactly its first min(N, blocks)."""
    n = None
    for c in parts:
        lead = next((i for i, m in enumerate(c.block_recompute) if m != "full"), len(c.block_recompute))
        if any(m != "none" for m in c.block_recompute[lead:]):
            raise UnsupportedPlanError(TARGET, f"stages[{c.index}].layer_recompute", "recomputed blocks are not the first blocks of the chunk (Megatron-LM's block method)")
        if lead < len(c.block_recompute):
            if n is not None and n != lead:
                raise UnsupportedPlanError(TARGET, f"stages[{c.index}].layer_recompute", f"{lead} recomputed blocks here, {n} in an earlier chunk; Megatron-LM's block method takes one N for every chunk")
            n = lead
    most = max(len(c.block_recompute) for c in parts)
    if n is None:
        return most
    for c in parts:
        if len(c.block_recompute) > n and c.block_recompute[:n].count("full") != n:
            raise UnsupportedPlanError(TARGET, f"stages[{c.index}].layer_recompute", "recomputed blocks are not the first blocks of the chunk")
    return n


def _parallel_args(plan: Plan, model: ModelSpec, parts: list[Chunk]) -> list[str]:
    """Degrees, sequence parallelism, the stage layout, sharding and overlap."""
    m, cfg = plan.mesh, plan.config
    args = ["--tensor-model-parallel-size", str(m.tp), "--pipeline-model-parallel-size", str(m.pp),
            "--context-parallel-size", str(m.cp), "--expert-model-parallel-size", str(m.ep)]
    if m.sp and m.tp > 1:
        args.append("--sequence-parallel")
    if cfg.tp_comm_overlap:
        args.append("--tp-comm-overlap")
    layout = pipeline_layout(plan, model, parts)
    if layout is not None:
        args += ["--pipeline-model-parallel-layout", layout]
    elif plan.schedule.virtual_stages > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(plan.schedule.virtual_stages)]
    if m.zero == 1:
        args.append("--use-distributed-optimizer")
    elif m.zero >= 2:
        if m.pp > 1:  # the validator's megatron rule (planner.plans.target_rules), for plans of another target
            raise UnsupportedPlanError(TARGET, "mesh.zero", f"zero {m.zero} is Megatron FSDP, which Megatron-LM runs without pipelining only (pp {m.pp}); "
                                                            "re-plan with --target megatron")
        args += ["--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", FSDP_STRATEGY[m.zero],
                 "--ckpt-format", "fsdp_dtensor"]
    if m.dp * m.cp > 1 and cfg.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
        if m.zero >= 1 and cfg.overlap_param_gather:
            args.append("--overlap-param-gather")
    return args


def pipeline_layout(plan: Plan, model: ModelSpec, parts: list[Chunk]) -> str | None:
    """``--pipeline-model-parallel-layout`` for the plan's stages (``E`` embedding, ``t`` decoder
    block, ``L`` final norm + output head + loss, ``|`` between stages), or None when Megatron-LM's
    even split (blocks / (PP x VPP) per chunk, embedding first, loss last) is the plan's split."""
    if plan.mesh.pp == 1:
        return None
    n_blocks = sum(len(c.blocks) for c in parts)
    even = n_blocks % len(parts) == 0 and all(len(c.blocks) == n_blocks // len(parts) for c in parts)
    head, norm = len(model.layers) - 1, len(model.layers) - 2
    if even and 0 in parts[0].layers and head in parts[-1].layers and norm in parts[-1].layers:
        return None
    stages = []
    for c in parts:
        if (norm in c.layers) != (head in c.layers):
            raise UnsupportedPlanError(TARGET, f"stages[{c.index}].layers", "the final norm and the output head sit in different stages; Megatron-LM runs both in the loss stage")
        tokens = (["E"] if 0 in c.layers else []) + ([f"t*{len(c.blocks)}" if len(c.blocks) > 1 else "t"] if c.blocks else [])
        stages.append(",".join(tokens + (["L"] if head in c.layers else [])))
    return "|".join(stages)
