"""The phases of a training step at which a rank's memory can peak: the start of a backward (the
in-flight activations and the loss's or a block's transient), its end (every gradient, one
micro-batch fewer in flight) and, under pipelining, the first reduce of a stage's only backward.
Split from ``costmodel.rank_memory``, which prices the states and buffers around them; every term
names its source here.
"""

from __future__ import annotations

from typing import NamedTuple

from costmodel.engines import RUNTIME_MEMORY_ENGINES, EngineTerms
from costmodel.nosync_rounds import backward_micro as _backward_micro, nosync_chunks, peak_round, round_held_bytes, running_chunk
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig


class Phase(NamedTuple):
    """What a rank holds at its peak phase, in bytes, beside its sharded states."""

    acts: float
    grads: float
    freed_params: float = 0.0
    """Gathered parameters freed by the phase (out of the parameters, into the allocator's cache)."""
    embedding_grad: float = 0.0
    """The embedding's last gradient among ``grads``, a transient the allocator's slack covers."""
    reduce_outputs: float = 0.0
    """FSDP2's fp32 reduce outputs held to the end of a backward: communication buffers."""
    unit: float = 0.0
    """The largest sharded unit's backward working set (``costmodel.rank_units._unit_bytes``), where the phase holds it."""
    gathered: float = 0.0
    """The chunks no-sync backwards keep gathered beside their fp32 accumulators (:func:`nosync_chunks`): buffers."""


def backward_start(t: RankSums, held: float, grads: float, unit: float | None, held_unit: float = 0.0) -> Phase:
    """The start of a backward: the in-flight activations ``held``, the largest transient and the
    sharded unit's working set (``costmodel.rank_units._unit_bytes``). Where the unit runs apart from the loss
    (``EngineTerms.unit_apart_from_loss``, ``unit`` not None) the loss's transient (the head's, the
    first of a backward) meets no gathered block, and a block's backward its unit but not the loss:
    the larger of the two. Only where every backward reshards its units: without pipelining, or with
    one micro-batch (``torch.distributed.pipelining`` runs the backwards before a stage's last with
    ``set_reshard_after_backward(False)``, so a later micro-batch's loss meets every unit gathered;
    measured on the differential's custom model at pp 2, ZeRO 3, interleaved, 8 micro-batches). The
    activations the layers already back-propagated have freed are not taken off (an upper bound of
    the block's moment). Measured with torch's tracker on the
    differential's custom model (ZeRO 3, cp 4, one micro-batch of 8): 308.0 KiB at the loss's
    backward (its two fp32 logit buffers, no gathered parameter), 326.5 KiB at the second block's
    backward (the unit gathered, the loss freed), where both at once priced 391.0. A recomputed
    layer's transient holds its stored activations again, which ``held`` already counts: the
    transients come net of them (:attr:`RankSums.work_stored_bytes`, ``costmodel.ranks.stored_in_work``)."""
    work, body = t.work_bytes - t.work_stored_bytes[0], t.body_work_bytes - t.work_stored_bytes[1]
    if unit is None:
        return Phase(held + work, grads, unit=held_unit)
    if work >= body + unit:
        return Phase(held + work, grads)
    return Phase(held + body, grads, unit=unit)


def peak_phase(cfg: ParallelConfig, t: RankSums, flight: float, held: float, grads: float, end_work: float = 0.0,
                backward_end: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0), unit: float = 0.0, apart: bool = False,
                sharded_at_start: bool = True, curve: tuple[tuple[float, float, float, float], float] | None = None,
                logits: float = 0.0, nosync: tuple[float, float] | None = None,
                losses: tuple[float, float] = (0.0, 0.0)) -> Phase:
    """The :class:`Phase` at the peak of a rank whose gradients are set to None every step (``EngineTerms.grads_freed_each_step``): the larger of two phases.

    A, the start of a backward: the in-flight micro-batches' activations and the loss / recompute
    transient, beside only the gradients earlier micro-batches left (none in a one-micro-batch step
    or in a pipeline rank that holds every micro-batch it runs; all of them otherwise: the runtime
    reduces each micro-batch's gradients into the sharded ones, and a pipeline's steady state runs a
    forward after the first backward; under interleaving, the gradients of the chunks that have run
    a backward by then: :func:`grad_share`). B, the end of that backward: every
    gradient, with one micro-batch fewer in flight (interleaved: the chunk-micro-batches freed by
    then). Between them activations are freed layer by layer while the layer's gradients
    appear (reduce-scattered per layer under FSDP / ZeRO 2-3), so the step's peak is the larger end
    (PyTorch's ``torch.distributed._tools`` memory tracker; Rajbhandari et al., SC'20, §5.2: ZeRO-2
    reduces each gradient as it is produced). Transients (:attr:`RankSums.work_bytes`: logits, the
    recomputed block) are counted in A; with one micro-batch B counts those of the layers but the head
    (:attr:`RankSums.body_work_bytes`: the loss's backward runs first, before any gradient of its
    micro-batch exists; a pipelined GPipe stage's next backward, its loss first, follows at once,
    beside the gradients: there B keeps the loss's transient; measured with torch's tracker on the
    differential's custom model, vocabulary 128 at width 32, one GPU, full recompute: the peak holds
    the loss's two fp32 logit buffers and no gradient, 821.9 KiB, where B with the logits priced
    937.9), ``end_work`` (the embedding's last gradient) in B, and in B
    the largest layer's stored activations (:attr:`RankSums.largest_layer_act_bytes`): a layer holds
    them until its own backward has run, so the backward of the chunk's last layer to finish sees
    them beside every gradient (without this, B priced no recompute below selective recompute, whose
    recomputed block counts as ``work_bytes``: issue 35).

    Where the stage's units stay gathered through no-sync backwards (``sharded_at_start`` false,
    ``costmodel.rank_units._keeps_gathered``), A holds no sharded gradient: the earlier micro-batches' gradients are the
    unsharded fp32 accumulators, priced among the buffers, and the sharded ones appear only at the
    last micro-batch's reduce-scatters, each as its unit's accumulator is freed, so B prices the
    accumulators alone (measured with torch's tracker on the differential's custom model, pp 2,
    ZeRO 3, 8 micro-batches: no sharded gradient at the peak). Where ``nosync`` is given (bytes per
    parameter of a chunk kept gathered, bytes of the largest unit's bf16 parameters: the
    native runtime, ``costmodel.rank_memory._nosync_bytes``), A and B hold only the chunks that state
    holds by then (:func:`nosync_chunks`), the reduced chunks' sharded gradients, A the running
    chunk's first units where it is not yet gathered (the running unit's and the next one's bf16
    parameters and the running unit's bf16 gradient, 3 x ``nosync[1]``, as :func:`backward_start` prices a unit apart
    from the loss: FSDP2's pre-backward hook on a unit's outputs gathers it only once the loss's
    backward has run; measured with torch's tracker on the differential sweep's custom model, pp 2,
    cp 2, ZeRO 3, GPipe, case d0048: the last stage peaks in its first loss backward with no
    gathered parameter) or, where it is, the running unit's bf16 gradient (``nosync[1]``: autograd
    writes it before ``post_backward``'s ``accumulate_unsharded_grad_if_needed`` adds it into the
    fp32 accumulator; measured on the sweep's GPT-2, pp 2, v 2, cp 2, four micro-batches, case d0068:
    574.1 KiB, 553.5 priced without it), and B the unit's reduce-scatter input only
    where its backward is the chunk's last (which reduces it; else the chunk is gathered after it,
    and its running unit's bf16 gradient beside the accumulators: measured on the sweep's GPT-2, pp 2,
    GPipe, eight micro-batches, case d0097: the first stage peaks in a later backward with the stage
    gathered, 413.6 KiB, 391.9 priced without it); under interleaving A is also each later backward's
    start where it is larger (``costmodel.nosync_rounds.later_rounds``: its chunks' states, the
    chunk-micro-batches then in flight, ``round_held_bytes``, and the running chunk's own transient
    and unit, ``running_chunk``; measured on the sweep's CNN, tp 4, pp 2, v 3, ZeRO 3, two
    micro-batches, case d0064 at draw seed 1: the last rank peaks in its fourth backward, the strided
    block's last, beside its 7.1 KiB of gathered bf16 parameters and fp32 accumulators, 141.8 KiB,
    3.7 % under priced at the first backward alone);
    without interleaving B is also the stage's last backward where it is larger (C: the last
    micro-batch's activations, the stage gathered and its unit's reduce-scatter input; measured on
    the sweep's CNN, pp 4, GPipe, eight micro-batches, case d0279: the last stage peaks there,
    103.4 KiB, 95.6 priced at the first backward's end).

    Where ``curve`` is given (the unit's working set while a layer back-propagates and at the end:
    :func:`layer_by_layer_end`'s ``units``) and the rank has one chunk, B is :func:`layer_by_layer_end`: a layer's
    gradients appear only as its activations are freed, so the largest layer never meets every gradient.

    ``logits``: the last stage's bf16 logits, which its layer-by-layer end holds beside every layer
    (``costmodel.rank_memory._kept_logit_bytes``); another stage's next backward holds its own
    micro-batch's stage output the same way (``RankSums.send_bytes``: ``PipelineStage.backward_one_chunk``
    keeps it until the backward returns; measured with torch's tracker on the differential sweep's
    GPT-2, pp 4, cp 2, two micro-batches, selective recompute, case d0198: the second stage peaks in
    its second backward with 18.5 KiB of forward activations, the block's 16.5 and the 2.0 KiB
    output, 3.2 % under without it).

    ``losses``: the other micro-batches' losses a GPipe last stage holds at A and at B
    (``costmodel.memory.held_loss_bytes``): at B one micro-batch fewer is in flight and the next
    one's loss is the transient B counts, so one fewer is held beside it (measured with torch's
    tracker on the differential sweep's custom model, pp 2, cp 2, ZeRO 3, GPipe, two micro-batches,
    case d0048: the last stage's second loss backward holds 66.1 KiB, no other loss, where B priced
    the first's loss beside it, +24.5 %); :func:`layer_by_layer_end`'s moments keep A's.

    B also holds ``backward_end``'s retained reduce outputs (as communication buffers), and no longer its
    freed gathered parameters (``costmodel.rank_memory._backward_end_bytes``; layer by layer, those of
    the layers back-propagated).

    The transients do not meet: B counts the largest of them, the embedding's gradient (a gradient,
    booked as one, and returned on its own for the allocator's slack) where it is the largest. So B's
    activations never exceed A's, and what A holds (``costmodel.rank_memory.forward_end_activation_bytes``, the
    activations ``estimate`` reports) grows with the micro-batch. The peak's own activations need not:
    at one micro-batch per step (no gradients during the forward) the peak can be B, where the
    activations are freed, while two micro-batches of half the size peak at A, the second forward
    beside the first's gradients (BLOOM 176B on one GPU, batch 2: micro-batch 1 peaks at A with 67 GiB
    of activations, micro-batch 2 at B with 11.5 of the 134 its forward's end holds)."""
    left, done = backwards_to_all_grads(cfg, flight)
    share = grad_share(cfg, t, left) if sharded_at_start else 0.0
    layered = curve is not None and bool(t.backward_curve) and sharded_at_start and t.params > 0
    if layered and share == 0:  # the first backward's units: layer by layer (layer_by_layer_end)
        apart, unit = False, 0.0
    start = backward_start(t, held, grads * share, unit if apart else None, _held_unit(cfg, unit))  # held: ``costmodel.rank_memory._held_act_bytes``
    states, j = None, 0
    sent = t.send_bytes - t.kept_send_bytes if cfg.engine in RUNTIME_MEMORY_ENGINES else 0.0  # the stage outputs ``costmodel.rank_memory._held_act_bytes`` holds
    if nosync is not None:  # the no-sync chunks' states at backward j (A) and after it (B)
        j = min(left, done)
        states = nosync_chunks(cfg, t, j), nosync_chunks(cfg, t, j + 1)
        start = _nosync_start(t, start, held, grads, nosync, states[0])
        warm = cfg.num_microbatches * cfg.vpp - left
        later = peak_round(cfg, t, j, warm, sent, grads, nosync)  # a later backward, more chunks gathered, fewer activations
        if later is not None:
            at = round_held_bytes(cfg, t, warm, later, sent)
            chunk, own = running_chunk(cfg, t, later, nosync[1])  # the running chunk's transient and unit
            phase = _nosync_start(chunk, backward_start(chunk, at, 0.0, None), at, grads, (nosync[0], own), nosync_chunks(cfg, t, later))
            start = max(start, phase, key=held_bytes)
    start = start._replace(acts=start.acts + losses[0])
    # the loss's transient comes first in a backward, before its gradients; only a GPipe stage runs the
    # next micro-batch's backward (its loss first) right after this one, beside its gradients
    work = t.work_bytes if cfg.pp > 1 and cfg.schedule == "gpipe" and cfg.num_microbatches > 1 else t.body_work_bytes
    # the layer back-propagating holds its stored activations and, without recompute, its backward's transient beside them
    last = max(work, t.largest_layer_act_bytes + (t.body_work_bytes if cfg.recompute == "none" else 0.0))
    extra_grad = max(end_work - last, 0.0)  # the embedding's gradient, when larger than the other transients
    retained, freed, *_ = backward_end
    done -= min(done - 1, left)  # chunk-micro-batches freed by then, net of the forwards run between
    end_grads = grads if sharded_at_start else 0.0  # else the fp32 accumulators, freed as the sharded ones appear
    end_acts = max(held - done * (t.act_bytes + sent) / cfg.vpp, 0.0) + last  # the backwards completing the gradients done
    end = Phase(end_acts + losses[1], end_grads + extra_grad, freed, extra_grad, retained, unit)
    if states is not None:  # a chunk's last backward reduces (its unit's reduce-scatter input) and reshards it
        final = _backward_micro(cfg, j) == cfg.num_microbatches - 1
        kept, reduced, _ = states[0] if final else states[1]
        end = end._replace(grads=grads * reduced + extra_grad, gathered=nosync[0] * t.params * kept,
                           unit=unit if final else nosync[1])
        if cfg.vpp == 1 or cfg.pp == 1:  # C: the stage's last backward reduces it, the last micro-batch alone in flight
            kept, reduced, _ = nosync_chunks(cfg, t, cfg.num_microbatches - 1)
            alone = max(held - (round(flight) - 1) * (t.act_bytes + sent), 0.0)
            end = max(end, Phase(alone, grads * reduced, gathered=nosync[0] * t.params * kept, unit=unit), key=held_bytes)
        # after the step's last backward every chunk is reduced: every sharded gradient, no activation (the
        # moment before the optimizer's step, which holds no more: tests/costmodel/test_optimizer_step.py)
        end = max(end, Phase(0.0, grads, unit=unit), key=held_bytes)
    if layered:
        next_loss = t.work_bytes if work > t.body_work_bytes else 0.0
        # a backward's stage output stays in fwd_cache through it, also where its last layer, back-propagated
        # first, counted it (RankSums.kept_send_bytes; measured on the sweep's CNN, pp 4, GPipe, case d0138);
        # the next backward's own stage output too (``sent``: measured on the sweep's GPT-2, pp 4, cp 2, d0198)
        kept = t.kept_send_bytes
        later = max(held - 2 * (t.act_bytes + sent), 0.0) + sent + kept if cfg.num_microbatches > 1 else None
        # the first backward's stage output stays held (measured on the sweep's Mixtral, pp 2, ZeRO 2,
        # case d0193: its first stage 6.3 % under without it)
        end = layer_by_layer_end(t, (max(held - t.act_bytes, 0.0) + kept, later), grads, end_work, backward_end, curve, next_loss, logits,
                                 t.recv_bytes if cfg.engine in RUNTIME_MEMORY_ENGINES else 0.0)
        end = end._replace(acts=end.acts + losses[0])
    return start if held_bytes(start) >= held_bytes(end) else end


def _nosync_start(t: RankSums, start: Phase, held: float, grads: float, nosync: tuple[float, float],
                  state: tuple[float, float, bool]) -> Phase:
    """A of :func:`peak_phase` at a backward whose no-sync chunks are in ``state``
    (``costmodel.nosync_rounds.nosync_chunks``) and which starts beside ``held`` activations
    (``start``: that backward's :func:`backward_start`): the gathered chunks' bf16 parameters and
    fp32 accumulators, the reduced chunks' sharded gradients and the running unit's bf16 gradient,
    or, where the running chunk is not yet gathered, its first units apart from the loss."""
    kept, reduced, running = state
    if not running:  # FSDP2 gathers a unit at its pre-backward hook: after the loss's backward (apart from it)
        start = backward_start(t, held, 0.0, 3 * nosync[1])
    return start._replace(grads=grads * reduced, gathered=nosync[0] * t.params * kept, unit=start.unit + (nosync[1] if running else 0.0))


def layer_by_layer_end(t: RankSums, bases: tuple[float, float | None], grads: float, end_work: float, backward_end: tuple[float, float, float, float],
                       units: tuple[tuple[float, float, float, float], float], next_loss: float = 0.0, logits: float = 0.0,
                       input_grad: float = 0.0) -> Phase:
    """B of :func:`peak_phase` layer by layer, for a rank whose first backward completes its
    gradients (one chunk: ``vpp == 1``): the largest of the moments of that backward
    (:attr:`RankSums.backward_curve`), each holding the activations of the layers not yet
    back-propagated with the running layer's transient, beside the gradients (and FSDP2's retained
    reduce outputs) of the layers already back-propagated, and its end (every gradient, the
    embedding's last one, and a GPipe stage's next loss ``next_loss``), and, where another backward
    follows (``bases[1]`` not None), the same moments of that one beside every gradient. ``bases``:
    the other in-flight micro-batches' activations at each (the first also the stage output sent).
    ``backward_end``: the retained reduce outputs and freed parameters at the end, and the bytes of
    each per parameter back-propagated at a layer's moment (``costmodel.rank_memory._backward_end_bytes``),
    so a moment may hold less per parameter done than before it (ZeRO 1-2 over four shards: 1 B of
    gradient for 2 of bf16 parameters freed). ``units``: ((bytes per parameter of the running layer, of the next
    one, of the one back-propagated before, of the layer's parameters whose gradient exists at its
    peak) while a layer back-propagates, the unit working set at the end): ``costmodel.rank_units._unit_bytes``' parts. Measured with
    torch's tracker on the differential sweep's custom model (case d0229, pp 4, ZeRO 2, one
    micro-batch, one block on rank 1): the peak is inside the block's attention backward, 37.8 KiB of
    activations and 38.4 of temporaries beside no gradient, and the backward's end holds the block's
    33.4 KiB fp32 reduce-scatter input beside its gradients, where the largest layer's activations
    beside every gradient and that input priced 99.1 KiB. The next backward, measured on the sweep's
    GPT-2 (pp 4, cp 2, two micro-batches, selective recompute, case d0198): the first stage peaks
    inside its second backward, one micro-batch's activations and the recomputed block beside the
    first's gradients (168.7 KiB; 168 priced).

    ``logits``: the last stage's bf16 logits, held beside every moment after the head's backward
    (``costmodel.rank_memory._kept_logit_bytes``); the head's own moment, the first (no parameter
    done), counts them already in the loss's transient (``costmodel.layer_other.head_cost``).
    Measured with torch's tracker on the differential sweep's custom model (pp 2, dp 2, ZeRO 3, one
    micro-batch, case d0078): the last stage peaks in its loss backward at 170.3 KiB of activations,
    temporaries and input, the curve's head moment without the kept logits (170.0; 186.0 with them).

    ``input_grad``: the gradient of the chunk's received input (``RankSums.recv_bytes``), which the
    end holds beside every gradient: ``PipelineStage.backward_one_chunk`` keeps the stage's input
    gradients in ``bwd_cache`` until they are sent to the previous stage (torch 2.13
    pipelining/stage.py). Measured with torch's tracker on the differential sweep's CNN (tp 2, pp 2,
    ZeRO 3, one micro-batch of 8, d0170 at seed 1): the last stage's peak, its block's reduce, holds
    the 4 KiB gradient of its input. The memory check drops it as the backward returns
    (``planner.runtime.memcheck.step.measure_step``, as ``stage_backward`` hands it on), before a
    GPipe stage's next backward starts from its loss: the end holds the larger of the two."""
    (base, later), (retained, freed, kept_rate, freed_rate) = bases, backward_end
    extra = max(end_work - next_loss, 0.0)  # the embedding's gradient, when larger than the next loss
    best = Phase(base + logits + max(next_loss, input_grad), grads + extra, freed, extra, retained, units[1])  # the last unit's working set
    per_own, per_next, per_before, per_grad = units[0]
    for acts, done, own, after, before, grad in t.backward_curve:
        f = min(done / t.params, 1.0)
        unit = per_own * own + per_next * after + per_before * before + per_grad * grad
        gone, outputs = freed_rate * done, kept_rate * done  # the gathered parameters and reduce outputs of the layers back-propagated
        kept = logits if done else 0.0  # the head's moment (the first) holds them in its transient
        phases = [Phase(base + kept + acts, grads * f, gone, 0.0, outputs, unit)]
        if later is not None:
            phases.append(Phase(later + kept + acts, grads, gone, 0.0, outputs, unit))  # reduce outputs: those of this backward
        best = max([best, *phases], key=held_bytes)
    return best


def zero3_units(t: RankSums, parts: tuple[float, float, float, float], unit: float, reduce_input: float) -> tuple[float, float]:
    """(the largest ZeRO 3 unit working set of any layer's backward, the one at the backward's end) of
    a native-runtime rank with a :attr:`RankSums.backward_curve`, from the bytes per parameter of
    ``costmodel.rank_units._layer_unit_bytes`` (``parts``; ``unit``, both, without a curve).

    A layer's backward holds its own gathered parameters and bf16 gradient, the next unit's
    prefetched parameters and the previous unit's fp32 reduce-scatter input: the largest unit meets
    all four (``unit``, ``costmodel.rank_units.FSDP2_UNIT_BYTES``) only where a unit as large runs
    before and after it, so the moments' own largest is priced, never above ``unit``. At the end, the
    chunk's last unit (its first layer) has nothing to prefetch, and ``post_backward`` reshards it
    before its ``foreach_reduce`` (which first reclaims the previous unit's reduce-scatter input): its
    fp32 reduce-scatter input (``reduce_input`` bytes per parameter) beside every gradient, its own
    new (torch 2.13 ``_fsdp_param_group.py``). Measured with torch's tracker on the differential
    sweep's CNN: tp 2, pp 2, ZeRO 3, one micro-batch (d0170 at seed 1), the last stage peaks at its
    block's reduce with the 18.25 KiB reduce-scatter input beside the block's new 18.25 KiB gradient
    and no gathered parameter, where 10 B per parameter beside every gradient priced +21.4 %; dp 4,
    ZeRO 3, two micro-batches (repro-cnn-dp-zero3): the peak inside the downsampling block's second
    backward holds its 7.1 KiB of gathered parameters, the prefetched 2.3 KiB and the last block's
    18.25 KiB reduce-scatter input, where the last block's 10 B per parameter priced +12.3 %."""
    own, after, before, grad = parts
    if not t.backward_curve or not any(parts):
        return unit, unit
    moments = max(own * p + after * a + before * b + grad * g for *_, p, a, b, g in t.backward_curve)
    return min(moments, unit), min(reduce_input * last_unit_params(t), unit)


def last_unit_params(t: RankSums) -> float:
    """Parameters of the layer a chunk's backward runs last, its first (the embedding on a first
    stage): the last point of :attr:`RankSums.backward_curve` (its parameters done and its own sum
    to the rank's), which every hull keeps; the largest layer's where there is no curve."""
    if not t.backward_curve:
        return t.largest_layer_params
    return max(t.backward_curve, key=lambda point: point[1])[2]


def _held_unit(cfg: ParallelConfig, unit: float) -> float:
    """The unit working set a backward's start holds where it does not run apart from the loss: none
    in the native runtime (its no-sync pipelined backwards hold the last backward's reduce-scatter
    input only at their end, measured with torch's tracker: ``costmodel.rank_units._unit_bytes``),
    the whole unit beside the loss elsewhere (torchtitan's published Llama 3.1 8B FSDP peak on 8 H100,
    82.4 GiB, ``planner/reference/published_runs.csv``, is 6.7 % under without it)."""
    return 0.0 if cfg.engine == "native" else unit


def backwards_to_all_grads(cfg: ParallelConfig, flight: float) -> tuple[int, int]:
    """(chunk forwards left after the warm-up, backwards until every local chunk has gradients).

    A rank holds gradients of all its chunks only once each has run a backward: backward ``j`` runs
    chunk ``v - 1 - (j // pp) mod v`` (``costmodel.memory.interleaved_held_act_bytes``), so after
    ``(v - 1) pp + 1`` backwards; one without interleaving. In the steady state a forward follows each
    backward while forwards are left (``planner.runtime.memcheck.step.schedule_actions``, measured
    with torch's tracker on the differential sweep's GPT-2 at pp 2, v 2, two micro-batches: the
    rank's peak is its first backward, with no gradient yet, where every chunk's gradient was priced
    beside three of its four chunk-micro-batches)."""
    v = cfg.vpp if cfg.pp > 1 else 1
    held = round(flight * v)
    return cfg.num_microbatches * v - held, (v - 1) * cfg.pp + 1


def grad_share(cfg: ParallelConfig, t: RankSums, left: int) -> float:
    """Share of the rank's gradients that exist when a steady-state forward holds a full warm-up of
    micro-batches: those of the chunks that have run a backward before it (backward ``j`` on chunk
    ``v - 1 - (j // pp) mod v``, one forward after each while ``left`` remain; weighted by
    ``RankSums.chunk_params``); all or none without interleaving. Measured with torch's tracker on
    the differential sweep's GPT-2 at pp 2, v 2, two micro-batches: the last rank peaks at its
    second loss backward beside the gradients of its last chunk only."""
    v = cfg.vpp if cfg.pp > 1 else 1
    if v == 1 or not t.chunk_params or left < 1:
        return 1.0 if left >= 1 else 0.0
    ran = {v - 1 - (j // cfg.pp) % v for j in range(min(left, (v - 1) * cfg.pp + 1))}
    total = sum(t.chunk_params)
    return sum(t.chunk_params[c] for c in ran) / total if total else 1.0


def held_bytes(phase: Phase) -> float:
    """The bytes a phase adds to the rank's sharded states."""
    return phase.acts + phase.grads + phase.reduce_outputs + phase.unit + phase.gathered - phase.freed_params


PP_ZERO0_REDUCE_UNIT_BYTES = (4, 6)
"""(gradient, buffer) bytes per parameter of the first FSDP2 unit a pipeline stage reduces under ZeRO 0
with one micro-batch: its fp32 reduce output, the sharded gradient of a one-shard HSDP mesh (4), and
its bf16 unsharded gradient with the fp32 reduce-scatter input ``foreach_reduce`` copies it into
(2 + 4; ``reduce_dtype=float32``, torch 2.13 ``_fsdp_collectives.py``). Measured with torch's tracker
on the differential sweep's Mixtral at pp 2, dp 2, ZeRO 0 (case d0091, the embedding-only first
stage, 4,096 parameters): 8 KiB of bf16 gradient and 16 + 16 KiB of fp32 reduce buffers at the peak."""


def first_reduce(cfg: ParallelConfig, t: RankSums, terms: EngineTerms, held: float) -> Phase | None:
    """The reduce of the first unit a pipeline stage's only backward finishes, under the native
    runtime's ZeRO 0 (FSDP2 HSDP with one shard: planner.runtime.fsdp) with one micro-batch: every
    micro-batch in flight but that unit's activations, beside :data:`PP_ZERO0_REDUCE_UNIT_BYTES` of
    the largest layer (the unit; no gradient yet but its own), whose gathered bf16 parameters the
    last backward has resharded (``set_reshard_after_backward``: measured 4 B of parameters per
    parameter at d0091's peak, the fp32 shard alone). None elsewhere: with more micro-batches
    the earlier backwards run without gradient sync (``EngineTerms.pp_unsharded_grads``), and ZeRO
    1-2 price their unit's reduce-scatter input among the buffers (``costmodel.rank_memory._buffer_bytes``),
    as this case does too, beside each layer's backward (``costmodel.rank_units._pp_zero0_reduces``)."""
    if cfg.pp == 1 or cfg.zero != 0 or cfg.num_microbatches != 1 or terms.engine != "native":
        return None
    grad, buffer = PP_ZERO0_REDUCE_UNIT_BYTES
    acts = max(held - t.largest_layer_act_bytes, 0.0)
    unit = t.largest_layer_params
    return Phase(acts, grad * unit, freed_params=cfg.param_bytes * unit, reduce_outputs=buffer * unit)
