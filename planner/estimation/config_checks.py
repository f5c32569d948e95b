"""Checks that a parallel configuration can run a model on a number of GPUs, all problems at once.

:func:`parallel_problems` is a pure function: it returns every problem it finds (torchtune collects
config errors and raises them once), each a short clause that prints every factor involved
(torchtitan's style: ``"tp 8 x pp 4 x cp 2 = 64 does not divide 48 GPUs"``) and says how to fix it.
The caller raises ``planner.errors.InputError(*problems)`` when the list is not empty.

The rules and where they come from:

- degrees: ``dp x tp x pp x cp`` must equal the GPU count (Megatron-LM ``arguments.py`` derives
  ``data_parallel_size = world_size // (TP x PP x CP)`` and asserts it divides).
- heads: attention heads and KV heads (``num_query_groups``) must be divisible by tp (Megatron-Core
  ``transformer_config.py`` / ``attention.py`` divide both by the TP size).
- stages: ``pp x vpp`` pipeline stages cannot exceed the layers being split (each stage holds at
  least one layer).
- context parallelism: the sequence must split into ``2 x cp`` equal chunks (Megatron-Core's
  load-balanced ring attention gives each CP rank two chunks, ``get_batch_on_this_cp_rank``).
- sequence parallelism: the (per-CP-rank) sequence must split evenly over tp
  (``megatron/core/tensor_parallel/mappings.py::_split_along_first_dim`` asserts it), and SP
  needs tp > 1 (Megatron's ``validate_args`` turns it off when TP == 1).
- batch: the global batch must be a multiple of ``micro_batch x dp`` (Megatron ``num_microbatches
  = GBS / (MBS x DP)``), and under the interleaved schedule (vpp > 1, which needs pp > 1) the
  number of micro-batches must be a multiple of pp (Megatron ``schedules.py``; Narayanan et al.
  SC21, sec. 2.2.2).
- experts: ep must divide every MoE layer's expert count and ``dp x cp`` (Megatron carves EP out of
  DP x CP, ``parallel_state.py``).
- explicit splits: ``stage_layers`` holds ``pp x vpp`` non-negative counts that sum to the model's
  layer count; ``layer_recompute`` holds one entry per model layer.
"""

from __future__ import annotations

from costmodel.specs import ModelSpec, ParallelConfig, TransformerLayer

_POSITIVE_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len")


def parallel_problems(model: ModelSpec, cfg: ParallelConfig, gpus: int) -> list[str]:
    """Every reason ``cfg`` cannot train ``model`` on ``gpus`` GPUs; an empty list when it can.

    Non-positive numbers are reported alone (the other rules divide by them); otherwise every rule
    runs and all of its findings are returned, in the order of the module docstring.
    """
    non_positive = _non_positive(cfg, gpus)
    if non_positive:
        return non_positive
    blocks = _transformer_layers(model)
    return [
        *_degree_problems(cfg, gpus),
        *_head_problems(blocks, cfg),
        *_stage_problems(model, blocks, cfg),
        *_sequence_problems(cfg),
        *_no_sequence_problems(model, cfg),
        *_batch_problems(cfg),
        *_expert_problems(model, blocks, cfg),
        *_layer_list_problems(model, cfg),
    ]


def _non_positive(cfg: ParallelConfig, gpus: int) -> list[str]:
    """Counts and degrees at or below zero (possible through ``model_construct`` or the API)."""
    values = {"gpus": gpus, **{name: getattr(cfg, name) for name in _POSITIVE_FIELDS}}
    return [
        f"{name.replace('_', '-')} is {value} (must be a positive integer)"
        for name, value in values.items()
        if value <= 0
    ]


def _transformer_layers(model: ModelSpec) -> list[TransformerLayer]:
    return [layer for layer in model.layers if isinstance(layer, TransformerLayer)]


def _degree_problems(cfg: ParallelConfig, gpus: int) -> list[str]:
    """The mesh must tile the GPUs exactly: tp x pp x cp divides them and dp takes the rest."""
    model_parallel = cfg.tp * cfg.pp * cfg.cp
    factors = f"tp {cfg.tp} x pp {cfg.pp} x cp {cfg.cp}"
    if gpus % model_parallel:
        return [
            f"{factors} = {model_parallel} does not divide {gpus} GPUs "
            "(pick degrees whose product divides the GPU count)"
        ]
    if cfg.dp * model_parallel != gpus:
        return [
            f"dp {cfg.dp} x {factors} = {cfg.dp * model_parallel} != {gpus} GPUs "
            f"(set dp = {gpus} / {model_parallel} = {gpus // model_parallel})"
        ]
    return []


def _head_problems(blocks: list[TransformerLayer], cfg: ParallelConfig) -> list[str]:
    """Tensor parallelism gives each rank whole attention heads and whole KV heads."""
    problems: list[str] = []
    for heads in sorted({block.num_heads for block in blocks}):
        if heads % cfg.tp:
            problems.append(
                f"{heads} attention heads are not divisible by tp {cfg.tp} (pick a tp that divides {heads})"
            )
    kv_only = {block.num_kv_heads for block in blocks if block.num_kv_heads != block.num_heads}
    for kv_heads in sorted(kv_only):
        if kv_heads % cfg.tp:
            problems.append(
                f"{kv_heads} KV heads are not divisible by tp {cfg.tp} (pick a tp that divides {kv_heads})"
            )
    return problems


def _stage_problems(model: ModelSpec, blocks: list[TransformerLayer], cfg: ParallelConfig) -> list[str]:
    """Each of the pp x vpp stages needs a layer: transformer blocks, or all layers if there are none."""
    problems: list[str] = []
    if cfg.vpp > 1 and cfg.pp == 1:
        problems.append(f"vpp {cfg.vpp} needs pp > 1 (interleaving splits pipeline ranks; set vpp 1 or raise pp)")
    stages = cfg.pp * cfg.vpp
    layers, kind = (len(blocks), "transformer layers") if blocks else (len(model.layers), "layers")
    if stages > layers:
        problems.append(
            f"pp {cfg.pp} x vpp {cfg.vpp} = {stages} pipeline stages exceed {layers} {kind} "
            f"(use at most {layers} stages)"
        )
    return problems


def _sequence_problems(cfg: ParallelConfig) -> list[str]:
    """Context parallelism cuts 2 x cp chunks; sequence parallelism cuts the rest over tp."""
    problems: list[str] = []
    if cfg.cp > 1 and cfg.seq_len % (2 * cfg.cp):
        problems.append(
            f"seq-len {cfg.seq_len} is not divisible by 2 x cp {cfg.cp} = {2 * cfg.cp} "
            "(context parallelism gives each rank two equal chunks)"
        )
    if cfg.sp and cfg.tp == 1:
        problems.append("sp needs tp > 1 (sequence parallelism splits over the TP group; turn sp off or raise tp)")
    local = cfg.seq_len // cfg.cp if cfg.seq_len % cfg.cp == 0 else cfg.seq_len
    if cfg.sp and cfg.tp > 1 and local % cfg.tp:
        problems.append(
            f"seq-len {cfg.seq_len} / cp {cfg.cp} = {local} tokens are not divisible by tp {cfg.tp} "
            "under sequence parallelism (pick a seq-len that tp x cp divides)"
        )
    return problems


def _no_sequence_problems(model: ModelSpec, cfg: ParallelConfig) -> list[str]:
    """A model whose samples are not sequences (one token each: recommenders, CNNs, GNNs) has nothing
    for sequence or context parallelism to split."""
    if model.has_sequence:
        return []
    on = [name for name, flag in (("sp", cfg.sp and cfg.tp > 1), (f"cp {cfg.cp}", cfg.cp > 1)) if flag]
    if not on:
        return []
    return [f"{' and '.join(on)} need a sequence to split, and {model.name} sees one token per sample "
            "(turn sp off and use cp 1; split it with dp, tp, pp and ZeRO)"]


def _batch_problems(cfg: ParallelConfig) -> list[str]:
    """Every DP rank runs the same whole number of micro-batches; interleaving wants a multiple of pp."""
    per_step = cfg.micro_batch * cfg.dp
    if cfg.global_batch % per_step:
        return [
            f"global batch {cfg.global_batch} is not divisible by micro-batch {cfg.micro_batch} x dp {cfg.dp} "
            f"= {per_step} (pick a global batch that is a multiple of {per_step})"
        ]
    microbatches = cfg.global_batch // per_step
    if cfg.vpp > 1 and cfg.pp > 1 and microbatches % cfg.pp:
        return [
            f"global batch {cfg.global_batch} / (micro-batch {cfg.micro_batch} x dp {cfg.dp}) = "
            f"{microbatches} micro-batches is not a multiple of pp {cfg.pp} under the interleaved schedule "
            "(change the global batch or micro-batch, or set vpp 1)"
        ]
    return []


def _expert_problems(model: ModelSpec, blocks: list[TransformerLayer], cfg: ParallelConfig) -> list[str]:
    """Expert parallelism spreads whole experts over a group carved out of dp x cp."""
    if cfg.ep == 1:
        return []
    expert_counts = sorted({block.num_experts for block in blocks if block.is_moe})
    if not expert_counts:
        return [f"ep {cfg.ep} needs a mixture-of-experts model ({model.name} has no experts; set ep 1)"]
    problems = [
        f"{experts} experts are not divisible by ep {cfg.ep} (pick an ep that divides {experts})"
        for experts in expert_counts
        if experts % cfg.ep
    ]
    if (cfg.dp * cfg.cp) % cfg.ep:
        problems.append(
            f"ep {cfg.ep} does not divide dp {cfg.dp} x cp {cfg.cp} = {cfg.dp * cfg.cp} "
            "(expert parallelism is carved out of dp x cp)"
        )
    return problems


def _layer_list_problems(model: ModelSpec, cfg: ParallelConfig) -> list[str]:
    """Explicit per-stage and per-layer lists must match the pipeline and the model."""
    problems: list[str] = []
    layers = len(model.layers)
    if cfg.stage_layers is not None:
        stages = cfg.pp * cfg.vpp
        if len(cfg.stage_layers) != stages:
            problems.append(
                f"stage_layers has {len(cfg.stage_layers)} entries, expected pp {cfg.pp} x vpp {cfg.vpp} = {stages}"
            )
        if any(count < 0 for count in cfg.stage_layers):
            problems.append(f"stage_layers {list(cfg.stage_layers)} has negative counts (use 0 or more)")
        total = sum(cfg.stage_layers)
        if total != layers:
            problems.append(
                f"stage_layers sum to {total}, but {model.name} has {layers} layers (make them sum to {layers})"
            )
    if cfg.layer_recompute is not None and len(cfg.layer_recompute) != layers:
        problems.append(
            f"layer_recompute has {len(cfg.layer_recompute)} entries, but {model.name} has {layers} layers "
            "(give one entry per layer)"
        )
    return problems
