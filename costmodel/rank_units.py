"""The largest FSDP2 unit's working set while a rank's backward runs through it: the gathered
parameters, gradients and reduce-scatter inputs of one unit (and the next one's prefetch) beside
the rank's states, by ZeRO stage, pipelining and runtime. Split from ``costmodel.rank_memory``, which
prices the states, activations and buffers around it; every term names its source here.
"""

from __future__ import annotations

from costmodel.engines import EngineTerms
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig

FSDP2_LOW_ZERO_UNIT_BYTES = 4
"""Bytes per parameter of the largest FSDP2 unit under ZeRO 1-2 (``EngineTerms.fsdp2_low_zero``:
parameters kept gathered) while it reduces its gradients: the fp32 reduce-scatter input into which
``foreach_reduce`` copies the unit's bf16 gradients (``reduce_dtype=float32``; torch 2.13
``_fsdp_collectives.py``), one held at a time (``reduce_scatter_max_input_buffers`` 1). Measured with
torch's tracker on the differential sweep's GPT-2 (ZeRO 1-2 over 2-4 shards): 49.6 KiB of "Reduce
Scatter" at the peak, 4 B times the 12,704 parameters of one block."""
FSDP2_UNIT_BYTES = 10
"""Bytes per parameter of the largest FSDP2 unit while it runs backward: its gathered bf16
parameters and the next unit's, prefetched (2 + 2), its unsharded bf16 gradient (2) and the fp32
copy reduce-scattered with ``reduce_dtype=float32`` (4) (torch.distributed.fsdp ``FSDPParamGroup``).
All four meet at the end of a block's backward with a block before it on the rank (the previous
unit's fp32 reduce-scatter input is held until the next one is issued); a rank with only two blocks
never sees them at once (8 B measured with torch's tracker on the differential's custom model at pp 2),
but the real-size oracle does (GPT-3 175B and Mixtral under ZeRO 3 over 64 and 8 GPUs: -3.8 % and
-3.0 % with 8 B)."""


def _keeps_gathered(cfg: ParallelConfig, terms: EngineTerms) -> bool:
    """Whether the stage's units stay gathered beside unsharded fp32 gradients for most of the step
    (``costmodel.rank_memory.FSDP2_PP_GATHERED_BYTES``): ``EngineTerms.fsdp_keeps_gathered``, or the native runtime's
    no-sync backwards under pipelining with more than one micro-batch
    (``EngineTerms.nosync_keeps_gathered``; measured with torch's tracker on the differential's custom
    model, pp 2, ZeRO 3, interleaved, 8 micro-batches: every unit of the rank gathered, 41.4 KiB, and
    the unsharded fp32 gradients among the backward's temporaries at the peak)."""
    return terms.fsdp_keeps_gathered or (terms.nosync_keeps_gathered and cfg.num_microbatches > 1)


def _unit_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> float:
    """The largest sharded unit's working set while the backward runs through it: ZeRO-3's gathered
    copy plus one prefetched (DeepSpeed estimator's 4·Ψ_largest at 2 bytes, doubled; FSDP2
    :data:`FSDP2_UNIT_BYTES`), under FSDP2 ZeRO 1-2 without pipelining its fp32 reduce-scatter input
    (:data:`FSDP2_LOW_ZERO_UNIT_BYTES`); where the stage stays gathered (:func:`_keeps_gathered`, a
    buffer of the whole step) 0 under ``EngineTerms.fsdp_keeps_gathered``, and under the native
    runtime's no-sync backwards the last backward's fp32 reduce-scatter input, beside the fp32
    accumulators (measured with torch's tracker on the differential's CNN at pp 4, ZeRO 3, GPipe,
    8 micro-batches, a one-block stage: 7.1 KiB gathered and 31.4 KiB of backward temporaries, 10.8 B
    per parameter, at its last backward)."""
    if terms.fsdp_keeps_gathered:
        return 0.0
    if _keeps_gathered(cfg, terms):  # the last backward's fp32 reduce-scatter input beside the accumulators
        return FSDP2_LOW_ZERO_UNIT_BYTES * t.largest_layer_params
    if _reduces_unit_by_unit(cfg, terms):
        return FSDP2_LOW_ZERO_UNIT_BYTES * t.largest_layer_params  # the unit's fp32 reduce-scatter input
    unit = FSDP2_UNIT_BYTES if terms.fp32_sharded_params else 2 * cfg.param_bytes
    return unit * t.largest_layer_params if cfg.zero == 3 else 0.0


def _layer_unit_bytes(cfg: ParallelConfig, terms: EngineTerms, unit: float) -> tuple[float, float, float, float]:
    """Bytes per parameter of the running layer, of the next one, of the one back-propagated before
    and of the running layer's parameters whose gradient exists at its peak (``costmodel.ranks._peak_grad_params``)
    that FSDP2 holds while a layer back-propagates (``costmodel.rank_phases.layer_by_layer_end``):
    under ZeRO 0-2 (parameters kept gathered; ZeRO 0: :func:`_hsdp_zero0`) the previous unit's fp32
    reduce-scatter input (:data:`FSDP2_LOW_ZERO_UNIT_BYTES`) and the running unit's unsharded bf16
    gradients, kept until its ``post_backward`` copies them into its own (torch 2.13
    ``FSDPParamGroup.post_backward``, ``foreach_reduce``): measured with torch's tracker on the sweep's
    Llama (tp 2, cp 4, ZeRO 2, full recompute, d0000): the MLP's three 2 KiB bf16 weight gradients at
    the peak, inside the recomputed block's MLP norm backward (-5.3 % without them); under ZeRO 3 also the layer's gathered bf16 parameters and
    unsharded bf16 gradient and the next unit's prefetched parameters (:data:`FSDP2_UNIT_BYTES`'
    parts, 2 + 2, 2). Measured with torch's tracker on the differential sweep's Mixtral (pp 4, ZeRO
    3, full recompute, case d0121): the last stage peaks inside its only block's backward with that
    block's 54.4 KiB of gathered bf16 parameters and the head's sharded gradients, where a 10 B per
    parameter unit beside every gradient priced 23 % over; the real-size oracle's GPT-3 175B (ZeRO 3
    over 64 GPUs) is 4.1 % under without the block's bf16 gradient.

    Where a pipeline stage's backwards accumulate whole fp32 gradients across micro-batches under ZeRO
    0-2 (``EngineTerms.pp_unsharded_grads``), the running unit's bf16 gradients alone: autograd writes
    them before ``post_backward``'s ``accumulate_unsharded_grad_if_needed`` adds them into the fp32
    accumulator (torch 2.13 ``_fsdp_param.py``), and no-sync backwards reduce nothing. Measured with
    torch's tracker on the differential sweep's CNN (pp 2, dp 2, ZeRO 0, GPipe, four micro-batches of
    one image, case d0089 at draw seed 1): the last stage peaks in its second backward inside the
    last block's first convolution backward, both convolutions' 4.5 KiB bf16 weight gradients beside
    the 33.2 KiB of fp32 accumulators (-4.5 % without them)."""
    if terms.pp_unsharded_grads and not (terms.fsdp_keeps_gathered or _keeps_gathered(cfg, terms)):
        return 0.0, 0.0, 0.0, float(cfg.param_bytes)
    if not unit or terms.fsdp_keeps_gathered or _keeps_gathered(cfg, terms):
        return 0.0, 0.0, 0.0, 0.0
    if _reduces_unit_by_unit(cfg, terms):
        return 0.0, 0.0, float(FSDP2_LOW_ZERO_UNIT_BYTES), float(cfg.param_bytes)
    if terms.fp32_sharded_params and cfg.zero == 3:
        return 2.0 * cfg.param_bytes, float(cfg.param_bytes), float(FSDP2_LOW_ZERO_UNIT_BYTES), 0.0
    return 0.0, 0.0, 0.0, 0.0


def _reduces_unit_by_unit(cfg: ParallelConfig, terms: EngineTerms) -> bool:
    """Whether each unit's backward issues FSDP2's ``foreach_reduce`` with its fp32 reduce-scatter
    input (:data:`FSDP2_LOW_ZERO_UNIT_BYTES`) while the parameters stay gathered: ZeRO 1-2 as FSDP2,
    ZeRO 0 as HSDP with one shard (:func:`_hsdp_zero0`) or a one-micro-batch pipeline stage
    (:func:`_pp_zero0_reduces`), unless no-sync backwards accumulate whole gradients
    (``EngineTerms.pp_unsharded_grads``)."""
    reduces = terms.fsdp2_low_zero or _hsdp_zero0(cfg, terms) or _pp_zero0_reduces(cfg, terms)
    return reduces and not terms.pp_unsharded_grads


def _hsdp_zero0(cfg: ParallelConfig, terms: EngineTerms) -> bool:
    """Whether the native runtime reduces each unit during the backward under ZeRO 0: FSDP2 HSDP with
    one shard per replica (``planner.runtime.fsdp``) runs the same ``foreach_reduce`` as ZeRO 1-2, its
    fp32 reduce-scatter input held until the next unit's reduce (``reduce_scatter_max_input_buffers``
    1, torch 2.13 ``_fsdp_param_group.py``), without pipelining (``EngineTerms.hsdp_backward_end``;
    under pipelining with one micro-batch :func:`_pp_zero0_reduces`).
    Measured with torch's tracker on the differential sweep's CNN (ZeRO 0, one GPU and dp 2, d0009 /
    d0076 / d0131): an 18.25 KiB fp32 buffer, 4 B times the 4,672 parameters of its largest block,
    beside the second block's backward at the peak."""
    return terms.hsdp_backward_end and cfg.zero == 0


def _pp_zero0_reduces(cfg: ParallelConfig, terms: EngineTerms) -> bool:
    """Whether a pipeline stage of the native runtime reduces unit by unit during its backward under
    ZeRO 0, as :func:`_hsdp_zero0` without pipelining: with one micro-batch the stage's only backward
    is its last, which ``PipelineStage.backward_maybe_with_nosync`` runs with gradient sync (torch 2.13
    pipelining/stage.py), so each unit's ``post_backward`` issues its ``foreach_reduce`` and the fp32
    reduce-scatter input stays held through the next unit's backward (``reduce_scatter_max_input_buffers``
    1, ``_fsdp_param_group.py``): the unit's buffer (:func:`_unit_bytes`), as under ZeRO 1-2 with one
    micro-batch, held beside the layers' backwards after the previous unit's
    (``costmodel.rank_phases.layer_by_layer_end``). Measured with torch's tracker on the differential sweep's CNN (pp 2,
    ZeRO 0, one micro-batch, cases d0092 at tp 4 and d0102 at dp 2): the second stage peaks in its
    first block's backward beside the next block's 18.25 KiB fp32 reduce-scatter input (4 B times its
    4,672 parameters), 7.8 % and 5.1 % under without it."""
    return terms.engine == "native" and cfg.zero == 0 and cfg.pp > 1 and cfg.num_microbatches == 1


def _end_unit(cfg: ParallelConfig, terms: EngineTerms, unit: float) -> float:
    """The unit working set the end of a backward holds beside every gradient: none under ZeRO 0 with
    one micro-batch (:func:`_hsdp_zero0`), where that phase already prices the running unit's sharded
    gradient, which does not exist yet, and in its place the previous unit's fp32 reduce-scatter
    input (at most the largest unit's, as priced) is held, which the first backward's layer-by-layer
    end prices beside each layer (``costmodel.rank_phases.layer_by_layer_end``). Measured with torch's tracker on the differential
    sweep's CNN at dp 4, selective recompute, one micro-batch (d0045): 201.4 KiB at the peak, 223.2
    priced with the unit at the backward's end."""
    return 0.0 if _hsdp_zero0(cfg, terms) and cfg.num_microbatches == 1 else unit
