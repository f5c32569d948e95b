"""Saved tensors two traced layers share: a layer's output that it saves for its own backward and the
next layer saves again as its input.

``torch.autograd.graph.saved_tensors_hooks`` reports a tensor to every op that saves it, and the
:class:`planner.intake.trace.record.Recorder` files it under the layer whose op saved it, so one
storage saved by two layers was counted by both. A ReLU saves its result (``threshold_backward``
reads it) and a convolution its input: in a residual CNN (He et al. 2016) each block's final ReLU
output is the next block's saved input, one tensor that autograd keeps once. Measured with torch's
tracker on the differential sweep's CNN (``tests/planner/runtime/cnn_model.py``, pp 2, ZeRO 3,
GPipe, one sample per micro-batch, case d0014 at draw seed 1): the first stage (stem and two
blocks) adds 10.41 KiB of activations per micro-batch forward, where the two blocks' inputs priced
again beside the saves of the layer before (1 KiB each) and the stage output beside its own saved
copy priced 13.41.

The tensor's bytes stay with the layer that saved it first (the producer), where it exists however the
model is cut into stages; the consumer's share is :attr:`costmodel.model_spec.GenericLayer.input_saved_bytes_per_token`,
taken off its stored activations where it is not recomputed (``costmodel.layer_other.generic_cost``).
A producer that saves its whole output holds the tensor a pipeline stage ending with it sends
(:attr:`costmodel.model_spec.GenericLayer.saves_output`, ``costmodel.ranks.keeps_output``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.intake.trace.record import Instance


@dataclass(frozen=True)
class SharedSaves:
    """Per traced instance (by index): bytes of its saved tensors an earlier layer saved first, and of
    those of its saved tensors a later layer reads (its output saved by itself)."""

    inputs: dict[int, float]
    outputs: dict[int, float]


def shared_saves(insts: list[Instance], owner: dict[int, int], producers: set[int], rep: Callable[[Instance], Instance]) -> SharedSaves:
    """:class:`SharedSaves` of ``insts`` (trace order): ``owner`` maps an instance to its spec layer,
    ``producers`` are the layers whose saved tensors their measured activations price (generic
    layers; a recognised layer's are its formula's, which keep no output). A stubbed repeat saves
    nothing of its own (:mod:`planner.intake.trace.stubs`): its representative ``rep(inst)`` stands
    for it, its output saved where the representative saves its whole output."""
    read: dict[int, dict[int, float]] = {}
    for inst in insts:
        for src, storages in inst.inputs.items():
            if owner.get(src) is not None and owner[src] != owner[inst.index]:
                read.setdefault(src, {}).update(storages)
    saves = {inst.index: {**inst.glue_saved, **inst.saved} for inst in insts}
    outputs = {i: sum(b for key, b in own.items() if key in read.get(i, {})) for i, own in saves.items()}
    for inst in insts:
        first = rep(inst)
        whole = first is not inst and read.get(first.index) and outputs[first.index] >= sum(read[first.index].values())
        if whole:
            saves[inst.index] = dict(read.get(inst.index, {}))
    seen: dict[int, int] = {}
    inputs: dict[int, float] = {}
    for inst in insts:
        inputs[inst.index] = sum(b for key, b in saves[inst.index].items()
                                 if key in seen and owner[seen[key]] != owner[inst.index] and owner[seen[key]] in producers)
        for key in saves[inst.index]:
            seen.setdefault(key, inst.index)
    return SharedSaves(inputs, outputs)
