"""The statistical cost of a batch size: the gradient-noise-scale model of McCandlish et al. 2018.

McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch Training" (arXiv:1812.06162),
eq. 2.11 and its consequences (sec. 2.3): to reach a given loss, training with batch B takes

    steps     S(B) = S_min · (1 + B_noise / B)
    examples  E(B) = E_min · (1 + B / B_noise),        with E_min = B_noise · S_min,

so that (S/S_min − 1)(E/E_min − 1) = 1. B_noise is the critical batch (the paper's B_crit ≈ B_simple),
here in sequences like ``--global-batch``. Below it, a bigger batch saves steps almost for free;
above it, it mostly spends more data. Time to train is S(B) · step_time(B): the step time grows with B
(more work per step on the same GPUs) while S(B) shrinks, so the fastest batch is not the largest.

The token budget D the user states (``--tokens``) is read as the tokens of a run at the critical batch:
E(B_noise) = 2·E_min, so E_min = D / (2·seq) and a run at batch B needs D·(1 + B/B_noise)/2 tokens.
Without a critical batch every batch trains on exactly D tokens.
"""

from __future__ import annotations


def tokens_needed(tokens: float, batch: int, critical_batch: int | None) -> float:
    """Tokens a run at ``batch`` needs to match a run of ``tokens`` at the critical batch:
    D·(1 + B/B_noise)/2 (McCandlish et al. 2018 eq. 2.11, E(B) = E_min (1 + B/B_noise)); D without one."""
    if critical_batch is None:
        return tokens
    return tokens * (1.0 + batch / critical_batch) / 2.0


def steps_needed(tokens: float, batch: int, seq_len: int, critical_batch: int | None) -> float:
    """Optimizer steps to train on :func:`tokens_needed` tokens at ``batch`` sequences of ``seq_len``:
    E(B)/B = S_min (1 + B_noise/B) (McCandlish et al. 2018 eq. 2.11)."""
    return tokens_needed(tokens, batch, critical_batch) / (batch * seq_len)


def relative_steps(batch: int, critical_batch: int) -> float:
    """S(B) / S_min = 1 + B_noise / B (McCandlish et al. 2018 eq. 2.11): what a point compares its
    candidate batches on, together with the step time, when no token budget is given."""
    return 1.0 + critical_batch / batch


def time_score(step_time_s: float, batch: int, critical_batch: int | None) -> float:
    """A quantity proportional to the time to train at ``batch``, for choosing among batches on the
    same GPUs: step_time(B)·S(B)/S_min, or step_time(B)/B (time per sequence) without a critical batch."""
    if critical_batch is None:
        return step_time_s / batch
    return step_time_s * relative_steps(batch, critical_batch)
