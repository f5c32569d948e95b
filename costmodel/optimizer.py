"""The optimizer step's HBM traffic on one GPU: Adam's own passes and the gradient passes around it.

``costmodel.step`` times them (memory-bound, at the GPU's achieved HBM bandwidth) over the parameters
a GPU updates; offloaded optimizer steps are ``costmodel.offload``'s.
"""

from __future__ import annotations

from costmodel.engines import EngineTerms
from costmodel.specs import ParallelConfig

ADAM_BYTES_PER_PARAM = 30
"""Adam step traffic per local parameter: read fp32 grad, master, m, v (16 B), write master, m, v
(12 B) and the bf16 copy (2 B) (costmodel-notes 2.3, derived)."""

GRAD_NORM_READS = 1
"""Passes over the optimizer shard's gradients that gradient clipping makes: one read for the global
norm (Megatron-LM ``megatron/core/optimizer/clip_grads.py`` ``get_grad_norm_fp32``, a
``multi_tensor_l2norm``; ``torch.nn.utils.clip_grad_norm_`` in torchtitan; DeepSpeed's
``get_grad_norm``). Scaling them in place happens only when the norm exceeds the clip, which a
stable run rarely does [assumption]."""


def gradient_pass_bytes(cfg: ParallelConfig, terms: EngineTerms, shard: float, buffer: float) -> float:
    """HBM bytes of the optimizer step's gradient passes besides Adam's own: the gradient-norm read
    over the ``shard`` the GPU updates (:data:`GRAD_NORM_READS`), and zeroing the gradient buffer
    of ``buffer`` parameters for the next step (Megatron-LM ``zero_grad_buffer`` -> ``grad_data.zero_()``,
    megatron/core/distributed/param_and_grad_buffer.py: the whole local buffer under ZeRO ≤ 1, the
    shard under 2-3; DeepSpeed's ``zero_grad``), except where the step frees the gradients instead
    (torchtitan, ``EngineTerms.grads_freed_each_step``). Gradients are the main-gradient dtype:
    ``grad_bytes``, fp32 for FSDP2's sharded mixed precision. Not modelled: fp16 runs' loss-scale
    unscale and inf check (the configuration does not say fp16 from bf16)."""
    grad = 4 if terms.fp32_sharded_params else cfg.grad_bytes
    zeroing = 0.0 if terms.grads_freed_each_step else grad * buffer
    return GRAD_NORM_READS * grad * shard + zeroing


def accumulation_bytes(cfg: ParallelConfig, terms: EngineTerms, params: float, shard: float) -> float:
    """HBM bytes a step spends adding micro-batch gradients into the accumulated ones, where the
    engine does not fuse it into the weight-gradient GEMM (``EngineTerms.grad_accum_fused``): each
    micro-batch after the first reads its new gradient and reads and writes the accumulator, the
    elementwise ``acc += new`` [derived]. Unsharded gradients (ZeRO ≤ 1, and FSDP2 under pipelining,
    ``EngineTerms.pp_unsharded_grads``) add the rank's ``params`` from the compute-dtype gradient
    (``param_bytes``); ZeRO 2-3 reduce-scatter every micro-batch and add the reduced ``shard`` (in
    ``grad_reduce_bytes``). The accumulator is the main-gradient dtype (``grad_bytes``; fp32 for
    FSDP2's sharded mixed precision)."""
    if cfg.num_microbatches <= 1 or terms.grad_accum_fused:
        return 0.0
    acc = 4 if terms.fp32_sharded_params else cfg.grad_bytes
    if cfg.zero >= 2 and not terms.pp_unsharded_grads:
        return (cfg.num_microbatches - 1) * shard * (cfg.grad_reduce_bytes + 2 * acc)
    return (cfg.num_microbatches - 1) * params * (cfg.param_bytes + 2 * acc)
