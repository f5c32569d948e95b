"""Fixed prose of the report: the glossary and the formulas behind every number.

The glossary-first layout and the formula beside each derived value follow the DeepSpeed flops
profiler's "Notations" block (ecosystem-notes B5); the formulas are the cost model's own
(``costmodel.step``, ``costmodel.pipeline``, ``costmodel.memory``, ``planner.estimation.estimate``).
"""

from __future__ import annotations

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("TP", "tensor parallelism: each weight matrix split over tp GPUs (Megatron column/row splits); all-reduces or reduce-scatters every layer"),
    ("SP", "sequence parallelism: with TP, norms and dropout work on 1/tp of the sequence, so activations outside attention/MLP are split too"),
    ("CP", "context parallelism: the sequence split over cp GPUs, attention exchanges keys/values in a ring"),
    ("PP", "pipeline parallelism: consecutive layers on pp GPU groups (stages), micro-batches flow through them"),
    ("VPP", "virtual pipeline stages: each pipeline rank holds vpp non-adjacent chunks (interleaved 1F1B), which shrinks the bubble"),
    ("DP", "data parallelism: dp replicas each take global batch / dp sequences; gradients are reduced over dp x cp"),
    ("EP", "expert parallelism: the experts of MoE layers split over ep GPUs carved out of dp x cp; tokens travel by all-to-all"),
    ("ZeRO-k", "sharding over data parallelism: 1 optimizer states (Megatron's distributed optimizer), 2 + gradients, 3 + parameters (FSDP)"),
    ("micro-batch", "sequences one GPU processes in one forward/backward; the global batch is dp x micro-batch x micro-batches"),
    ("bubble", "time pipeline ranks sit idle while the pipeline fills and drains"),
    ("link time", "time a dimension's communication keeps its links busy, hidden behind compute or not"),
    ("exposed", "communication time not hidden behind compute: it adds to the step"),
    ("recompute", "activation recomputation: selective redoes core attention, full redoes the whole layer in backward"),
    ("MFU", "model FLOPs utilisation: useful model FLOPs per second over the GPUs' dense peak"),
)

FORMULAS: tuple[tuple[str, str, str], ...] = (
    ("data parallelism", "dp = GPUs / (tp x pp x cp)", "Megatron-LM arguments.py"),
    ("micro-batches", "m = global batch / (micro-batch x dp)", "Megatron-LM num_microbatches"),
    ("step time", "T = m x max_r X_r + bubble + exposed PP + exposed DP + optimizer", "costmodel.step (after Calculon)"),
    ("per micro-batch of rank r", "X_r = forward + backward + recompute + exposed TP/CP/EP/ZeRO-3 communication + overlap slowdown", "costmodel.step"),
    ("bubble", "(sum_r X_r - max_r X_r) / v for interleaved 1F1B (v = vpp), / 1 otherwise; p equal stages: (p - 1)/(v m) of the ideal time", "Narayanan et al. 2021 section 2.2; costmodel.pipeline"),
    ("tokens/s", "global batch x seq len / T", "planner.estimation.estimate"),
    ("MFU", "model FLOPs / (GPUs x T x dense BF16 peak); no recompute FLOPs, causal attention counted as half the s x s work", "planner.estimation.estimate, costmodel.flops"),
    ("memory per GPU", "params + grads + optimizer states (each / (dp x cp) when ZeRO shards it) + activations of in-flight micro-batches + buffers", "costmodel.step, Megatron-LM theoretical_memory_usage.py"),
    ("model states per parameter", "18 B without the distributed optimizer, 6 + 12/dp B with it (bf16 weights, fp32 grads, fp32 master + Adam m, v)", "Megatron-LM theoretical_memory_usage.py"),
    ("activations per layer", "s b h (34 + 5 a s / h) / t bytes without recompute (Korthikanti et al. 2022 eq. 2), / t everywhere with SP", "costmodel.memory"),
)

TIMELINE_NOTE = ("Forward boxes (light) take a third of the rank's per-micro-batch time and backward boxes (dark) two thirds; "
                 "numbers are micro-batches, shades are model chunks. Gaps are the bubble.")
