"""The run record as text for the terminal (``meshplan run`` without ``--json``)."""

from __future__ import annotations

from planner.runtime.record import Comparison, RunRecord


def _row(name: str, c: Comparison, fmt: str) -> str:
    measured = format(c.measured, fmt) if c.measured is not None else "-"
    predicted = format(c.predicted, fmt) if c.predicted is not None else "-"
    error = f"{c.error:+.1%}" if c.error is not None else "-"
    return f"  {name:<18}{measured:>14}{predicted:>14}{error:>10}"


def record_text(record: RunRecord) -> str:
    """A few lines: the plan, the environment, measured vs predicted, losses, memory per rank."""
    env, st = record.env, record.step_time
    lines = [
        f"run of {record.model.name} ({record.model.params:,} parameters): {record.plan.summary}",
        f"  {record.world_size} ranks, {env.backend} on {env.device_type} ({env.device_names[0]}), torch {env.torch_version}",
        f"  {record.steps} steps, {st.warmup_steps} warm-up; step time median {st.median_s:.4g} s, spread {st.spread:.1%}",
        f"  {'':<18}{'measured':>14}{'predicted':>14}{'error':>10}",
        _row("step time (s)", record.step_time_s, ".4g"),
        _row("tokens/s", record.tokens_per_s, ".4g"),
        _row("MFU", record.mfu, ".3g"),
        _row("peak memory (GiB)", record.peak_memory_gib, ".4g"),
        "  loss per step: " + ", ".join(f"{x:.5f}" for x in record.losses),
        "  memory per rank (GiB, allocated / reserved): " + ", ".join(
            f"{m.rank}: {m.peak_allocated_gib:.3g} / {m.peak_reserved_gib:.3g}" if m.peak_reserved_gib is not None
            else f"{m.rank}: {m.peak_allocated_gib:.3g}" for m in record.memory),
    ]
    return "\n".join(lines + [f"  note: {n}" for n in record.notes])
